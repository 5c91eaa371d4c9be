//! A submitted kernel is hostile: whatever PTX it brings, the simulator answers with a result or
//! an error, never a panic or a hang. Here: hundreds of random one-line edits of stock kernels
//! (a line deleted, doubled, a literal changed, two operands swapped).

mod gemm;

use gemm::{facts, fixture, Dtype, Problem};
use sim::{Options, Policy, Program};

struct R(u64);
impl R {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn edit(text: &str, r: &mut R) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let body: Vec<usize> = (0..lines.len())
        .filter(|&i| {
            let t = lines[i].trim();
            t.ends_with(';') && !t.starts_with('.') && !t.starts_with("//")
        })
        .collect();
    let i = body[r.below(body.len())];
    let mut out: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
    match r.below(4) {
        0 => out[i] = String::new(),
        1 => out.insert(i, lines[i].to_string()),
        2 => {
            // Replace the last number on the line.
            let l = lines[i];
            if let Some(p) = l.rfind(|c: char| c.is_ascii_digit()) {
                let start = l[..=p]
                    .rfind(|c: char| !c.is_ascii_digit())
                    .map_or(0, |s| s + 1);
                let v = [0u64, 1, 7, 31, 255, 1 << 20, u32::MAX as u64][r.below(7)];
                out[i] = format!("{}{v}{}", &l[..start], &l[p + 1..]);
            }
        }
        _ => {
            let l = lines[i];
            if let Some((op, rest)) = l.trim().split_once(char::is_whitespace) {
                let mut ops: Vec<&str> = rest.trim_end_matches(';').split(", ").collect();
                if ops.len() >= 2 {
                    let (a, b) = (r.below(ops.len()), r.below(ops.len()));
                    ops.swap(a, b);
                    out[i] = format!("\t{op} {};", ops.join(", "));
                }
            }
        }
    }
    out.join("\n")
}

#[test]
fn random_edits_of_stock_kernels_never_panic() {
    let mut r = R(42);
    let mut outcomes = [0usize; 3];
    for (fixture_name, step) in [("step0.f16", 0), ("step3.f16", 3), ("step6.f16", 6)] {
        let text = fixture(fixture_name);
        let f = facts(step);
        for round in 0..50 {
            let edited = edit(&text, &mut r);
            let res = std::panic::catch_unwind(|| {
                let p = match Program::parse(&edited) {
                    Ok(p) => p,
                    Err(_) => return 0,
                };
                let mut prob = Problem::new(256, 512, 256, Dtype::F16, round);
                let l = prob.launch(&f, 1).unwrap();
                let mut dev = std::mem::take(&mut prob.dev);
                let o = Options {
                    seed: round,
                    policy: Policy::Random,
                    max_steps: 3_000_000,
                    trace: false,
                    ..Options::default()
                };
                match sim::run(&p, &mut dev, &l, &o) {
                    Ok(_) => 2,
                    Err(_) => 1,
                }
            });
            match res {
                Ok(k) => outcomes[k] += 1,
                Err(_) => panic!("{fixture_name}, edit {round}: the simulator panicked"),
            }
        }
    }
    eprintln!(
        "refused at decode: {}, stopped with an error: {}, ran to the end: {}",
        outcomes[0], outcomes[1], outcomes[2]
    );
}

/// A kernel that reads the bytes of its CUtensorMap parameter (to tell the simulator from a
/// GPU, say) is stopped: the map's encoding is the driver's and is not modelled.
#[test]
fn reading_a_tensor_map_parameter_is_refused() {
    let text = fixture("step0.f16");
    // After the kernel takes the map's address, load its first word.
    let edited = text.replacen(
        "mov.b64 \t%rd8, gemm_kernel_param_0;",
        "mov.b64 \t%rd8, gemm_kernel_param_0;\n\tld.param.u64 \t%rd9, [gemm_kernel_param_0];",
        1,
    );
    assert_ne!(edited, text);
    let p = Program::parse(&edited).unwrap();
    let mut prob = Problem::new(256, 256, 128, Dtype::F16, 1);
    let l = prob.launch(&facts(0), 148).unwrap();
    let mut dev = std::mem::take(&mut prob.dev);
    let e = sim::run(&p, &mut dev, &l, &Options::default()).unwrap_err();
    assert!(e.to_string().contains("CUtensorMap parameter"), "{e}");
}

//! The workbook's own test kernels (`tests/ptx/own/*.cu`, written from scratch for the project;
//! PTX from NVRTC by `tests/ptx/own/gen.py`): constructs public Blackwell kernels use that the
//! simulator once tripped on. Each must give the outcome `tests/ptx/own/README.md` names, under
//! every schedule (seeds 1-3, each policy).

use sim::{Device, Launch, Options, Param, Policy, Program, SimError};

fn ptx(name: &str) -> String {
    let path = format!("{}/tests/ptx/own/{name}.ptx", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn u32s(d: &Device, a: u64, n: usize) -> Vec<u32> {
    let mut b = vec![0u8; n * 4];
    assert!(d.read(a, &mut b));
    b.chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn put(d: &mut Device, v: &[u32]) -> u64 {
    let a = d.alloc(v.len() as u64 * 4);
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    assert!(d.write(a, &bytes));
    a
}

type Check = Box<dyn Fn(&Device) -> Result<(), String>>;

/// A launch of kernel `kernel`: its parameters, grid, block, cluster size and output check
/// (outputs are poisoned first, so an unwritten element fails).
struct Case {
    kernel: &'static str,
    params: Vec<Param>,
    grid: u32,
    block: u32,
    cluster: u32,
    check: Check,
}

/// Every element of `n` u32 at `out` as `want(i)`.
fn expect_u32(out: u64, n: usize, want: impl Fn(usize) -> u32 + 'static) -> Check {
    Box::new(move |d| {
        for (i, &v) in u32s(d, out, n).iter().enumerate() {
            if v != want(i) {
                return Err(format!("out[{i}] = {v}, want {}", want(i)));
            }
        }
        Ok(())
    })
}

fn case(base: &str, dev: &mut Device) -> Case {
    match base {
        "body_shared" => {
            let out = put(dev, &[0xDEAD; 128]);
            Case {
                kernel: "body_shared",
                params: vec![Param::U64(out)],
                grid: 1,
                block: 128,
                cluster: 1,
                check: expect_u32(out, 128, |i| {
                    3 * ((i as u32 + 1) % 128) + 1000 * (i as u32 % 4)
                }),
            }
        }
        "wait_loop_3x" => {
            let out = put(dev, &[0xDEAD; 64]);
            Case {
                kernel: "wait_loop_3x",
                params: vec![Param::U64(out)],
                grid: 1,
                block: 64,
                cluster: 1,
                check: expect_u32(out, 64, |i| if i < 32 { 0 } else { 66 }),
            }
        }
        "wide_access" => {
            let src: Vec<u32> = (0..512u32).map(|i| i * 7 + 3).collect();
            let s = put(dev, &src);
            let dst = put(dev, &[0xDEAD; 512]);
            Case {
                kernel: "wide_access",
                params: vec![Param::U64(s), Param::U64(dst)],
                grid: 1,
                block: 32,
                cluster: 1,
                check: expect_u32(
                    dst,
                    512,
                    move |i| {
                        if i % 16 < 8 {
                            src[i] + 1
                        } else {
                            src[i] * 2
                        }
                    },
                ),
            }
        }
        "handoff" | "smem_operands" => {
            let tma = base == "handoff";
            let mut r = 12345u64;
            let mut next = || {
                r = r
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((r >> 33) % 9) as i32 - 4
            };
            let a: Vec<i32> = (0..128 * 16).map(|_| next()).collect();
            let b: Vec<i32> = (0..32 * 16).map(|_| next()).collect();
            // Small integers are exact in bf16: the top half of their f32 bits.
            let bits = |v: &[i32]| -> Vec<u8> {
                v.iter()
                    .flat_map(|&x| (((x as f32).to_bits() >> 16) as u16).to_le_bytes())
                    .collect()
            };
            let aa = dev.alloc(a.len() as u64 * 2);
            assert!(dev.write(aa, &bits(&a)));
            let ba = dev.alloc(b.len() as u64 * 2);
            assert!(dev.write(ba, &bits(&b)));
            let da = put(dev, &vec![0x7FC0_0000; 128 * 32]);
            let params = if tma {
                use sim::units::tensormap::*;
                let map = |base: u64, rows: u32| {
                    Param::TensorMap(
                        TensorMapDesc::encode_tiled(
                            TmaDtype::Bf16,
                            2,
                            base,
                            &[16, rows as u64],
                            &[32],
                            &[8, rows],
                            &[1, 1],
                            TmaInterleave::None,
                            TmaSwizzle::None,
                            TmaL2Promotion::None,
                            TmaOobFill::None,
                        )
                        .expect("tensor map"),
                    )
                };
                vec![map(aa, 128), map(ba, 32), Param::U64(da)]
            } else {
                vec![Param::U64(aa), Param::U64(ba), Param::U64(da)]
            };
            Case {
                kernel: if tma { "handoff" } else { "smem_operands" },
                params,
                grid: 1,
                block: 128,
                cluster: 1,
                check: Box::new(move |d| {
                    let o = u32s(d, da, 128 * 32);
                    for i in 0..128 {
                        for j in 0..32 {
                            let want: i32 = (0..16).map(|k| a[i * 16 + k] * b[j * 16 + k]).sum();
                            let got = f32::from_bits(o[i * 32 + j]);
                            if got != want as f32 {
                                return Err(format!("D[{i}][{j}] = {got}, want {want}"));
                            }
                        }
                    }
                    Ok(())
                }),
            }
        }
        "pair_mma" => {
            let mut r = 987654321u64;
            let mut next = || {
                r = r
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((r >> 33) % 9) as i32 - 4
            };
            let a: Vec<i32> = (0..256 * 16).map(|_| next()).collect();
            let b: Vec<i32> = (0..32 * 16).map(|_| next()).collect();
            // Small integers are exact in bf16: the top half of their f32 bits.
            let bits = |v: &[i32]| -> Vec<u8> {
                v.iter()
                    .flat_map(|&x| (((x as f32).to_bits() >> 16) as u16).to_le_bytes())
                    .collect()
            };
            let aa = dev.alloc(a.len() as u64 * 2);
            assert!(dev.write(aa, &bits(&a)));
            let ba = dev.alloc(b.len() as u64 * 2);
            assert!(dev.write(ba, &bits(&b)));
            let da = put(dev, &vec![0x7FC0_0000; 256 * 32]);
            Case {
                kernel: "pair_mma",
                params: vec![Param::U64(aa), Param::U64(ba), Param::U64(da)],
                grid: 2,
                block: 128,
                cluster: 2,
                check: Box::new(move |d| {
                    let o = u32s(d, da, 256 * 32);
                    for i in 0..256 {
                        for j in 0..32 {
                            let want: i32 = (0..16).map(|k| a[i * 16 + k] * b[j * 16 + k]).sum();
                            let got = f32::from_bits(o[i * 32 + j]);
                            if got != want as f32 {
                                return Err(format!("D[{i}][{j}] = {got}, want {want}"));
                            }
                        }
                    }
                    Ok(())
                }),
            }
        }
        "dsmem_leader" => {
            let out = put(dev, &[0xDEAD; 32]);
            Case {
                kernel: "dsmem_leader",
                params: vec![Param::U64(out)],
                grid: 2,
                block: 32,
                cluster: 2,
                check: expect_u32(out, 32, |_| 201),
            }
        }
        other => panic!("no launch for {other}"),
    }
}

fn schedules() -> Vec<Options> {
    let mut v = Vec::new();
    for seed in 1..=3 {
        for policy in [
            Policy::Random,
            Policy::Pct { depth: 3 },
            Policy::AsyncLate,
            Policy::AsyncEarly,
        ] {
            v.push(Options {
                seed,
                policy,
                ..Options::default()
            });
        }
    }
    v
}

/// Run `ptx` (a variant of kernel `base`) under every schedule; each outcome as "PASS", the
/// rule's name, or the error/wrong result in words.
fn outcomes(base: &str, ptx: &str) -> Vec<String> {
    let prog = Program::parse(ptx).unwrap_or_else(|e| panic!("{base}: {e}"));
    let mut dev = Device::new();
    let c = case(base, &mut dev);
    let l = Launch {
        kernel: c.kernel.into(),
        grid: [c.grid, 1, 1],
        block: [c.block, 1, 1],
        cluster: [c.cluster, 1, 1],
        params: c.params,
        ..Launch::default()
    };
    schedules()
        .into_iter()
        .map(|o| {
            let mut d = dev.clone();
            let what = format!("seed {} {:?}", o.seed, o.policy);
            match sim::run(&prog, &mut d, &l, &o) {
                Ok(_) => match (c.check)(&d) {
                    Ok(()) => "PASS".to_string(),
                    Err(e) => format!("{what}: WRONG {e}"),
                },
                Err(SimError::Rule { rule, .. }) => rule.to_string(),
                Err(e) => format!("{what}: {e}"),
            }
        })
        .collect()
}

/// Every schedule gives `want` (one of `want`'s names).
fn assert_all(name: &str, got: &[String], want: &[&str]) {
    for g in got {
        assert!(
            want.contains(&g.as_str()),
            "{name}: wanted {want:?}, got {g}"
        );
    }
}

#[test]
fn body_shared_wait_loop_and_wide_access_run_and_verify() {
    for n in ["body_shared", "wait_loop_3x", "wide_access"] {
        assert_all(n, &outcomes(n, &ptx(n)), &["PASS"]);
    }
}

#[test]
fn a_wait_handed_on_through_bar_sync_is_credited_and_its_plants_are_caught() {
    assert_all("handoff", &outcomes("handoff", &ptx("handoff")), &["PASS"]);
    assert_all(
        "handoff_no_sync",
        &outcomes("handoff", &ptx("handoff_no_sync")),
        &["ld-after-commit-wait", "ld-in-flight"],
    );
    assert_all(
        "handoff_no_fence",
        &outcomes("handoff", &ptx("handoff_no_fence")),
        &["fence-after-sync"],
    );
}

#[test]
fn mma_operands_written_by_ordinary_stores_need_only_the_proxy_fence() {
    // PTX ISA "Proxies", "membar/fence" (fence.proxy.async): st.shared, then the proxy fence
    // and a thread synchronisation, then tcgen05.mma reading them is legal; adjacent threads'
    // 16-bit stores into one 32-bit word are not a race.
    let src = ptx("smem_operands");
    assert_all("smem_operands", &outcomes("smem_operands", &src), &["PASS"]);
    // Planted: the proxy fence removed.
    let planted = src.replace("fence.proxy.async.shared::cta;", "");
    assert_ne!(planted, src);
    assert_all(
        "smem_operands without fence.proxy.async",
        &outcomes("smem_operands", &planted),
        &["proxy-fence-before-async"],
    );
}

#[test]
fn dsmem_leader_through_mapa_runs_and_verifies() {
    // The control of dsmem_leader.cu. The bit-24 leader address (dsmem_leader.ptx) needs the
    // shared::cluster address window of another branch; its expectation is left to it, but
    // the kernel must decode.
    assert_all(
        "dsmem_leader_mapa",
        &outcomes("dsmem_leader", &ptx("dsmem_leader_mapa")),
        &["PASS"],
    );
    Program::parse(&ptx("dsmem_leader")).expect("dsmem_leader decodes");
}

#[test]
fn the_pairs_collective_alloc_orders_the_peer_before_the_leaders_mma() {
    // PTX ISA "tcgen05.alloc": one warp of each CTA of the pair performs a .cta_group::2
    // allocation together, so the leader's MMA right after its own alloc (no barrier with the
    // peer) writes columns the peer has allocated; warp 1 frees them after the cluster barrier.
    assert_all(
        "pair_mma",
        &outcomes("pair_mma", &ptx("pair_mma")),
        &["PASS"],
    );
    // Planted: the odd CTA never allocates: the leader's allocation never completes.
    for o in outcomes("pair_mma", &ptx("pair_mma_peer_skips")) {
        assert!(
            o.contains("deadlock") && o.contains("peer CTA (cluster rank 1)"),
            "pair_mma_peer_skips: {o}"
        );
    }
}

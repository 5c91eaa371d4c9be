//! Step 0's timeline figure (`assets/step0-timeline.svg`), drawn from the simulator's own trace
//! of step 0 (review S25): the trace is committed at [`TRACE`], written by [`REGENERATE`], and
//! the figure is redrawn from it by `WORKBOOK_WRITE_FIGURES=1 cargo test -p runner figures`
//! (`figures::FIGURES` holds it beside the other drawn figures, and its test fails when the SVG
//! is not what this code draws from the committed trace). `runner/tests/book_step0_figure.rs`
//! runs a fresh `runner step 0 --sim --trace` and fails when its [`structure`] (the order of
//! warp 0's issues, each slot's states, each refill's lookahead) differs from the committed
//! trace's, so the figure cannot drift from what the kernel does.
//!
//! Only `std`, `anyhow` and `serde_json`: the test includes this file by path.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::fmt::Write as _;

/// The committed trace the figure is drawn from.
pub const TRACE: &str = "assets/results/trace-step0-sim.json";

/// The command that writes [`TRACE`] (with `.svg` and `.txt` beside it), from the checkout.
pub const REGENERATE: &str = "runner step 0 --sim --trace assets/results/trace";

/// One trace event of CTA rank 0, the fields the figure reads.
#[derive(Debug, Clone)]
struct Ev {
    ph: String,
    cat: String,
    name: String,
    ts: f64,
    dur: f64,
    tid: u64,
    barrier: String,
    state: String,
}

/// What the figure shows, read from the trace.
#[derive(Debug)]
pub struct Step0 {
    stages: usize,
    /// Per k-block: its first and last TMA issue on warp 0, and its slot.
    loads: Vec<(f64, f64, usize)>,
    /// Per k-block: its first `tcgen05.mma` and its `tcgen05.commit`.
    mmas: Vec<(f64, f64)>,
    /// The commit that signals `acc_full`, after the last k-block's.
    acc_commit: Option<f64>,
    /// Per k-block refill (k-block `j` whose slot was used before): `(j, i, arrival)`, where
    /// `i` is the k-block whose MMAs' commit freed the slot just before the load was issued.
    refills: Vec<(usize, usize, f64)>,
    /// Warp 0's waits: start, end, barrier.
    waits: Vec<(f64, f64, String)>,
    /// Per slot: its state spans, in time order.
    slots: Vec<Vec<(f64, f64, String)>>,
    /// The other warps: their waits and their `tcgen05.ld` issues.
    epilogue_waits: Vec<(f64, f64)>,
    epilogue_lds: Vec<f64>,
    /// Warp 0's own `tcgen05.ld` issues (it is an epilogue warp too).
    warp0_lds: Vec<f64>,
    end: f64,
    seed: String,
    policy: String,
    verdict: String,
}

fn slot_of(barrier: &str) -> Option<usize> {
    let (_, rest) = barrier.rsplit_once('[')?;
    rest.trim_end_matches(']').parse().ok()
}

impl Step0 {
    /// Read a `runner step 0 --sim --trace` JSON.
    pub fn parse(json: &str) -> Result<Step0> {
        let v: Value = serde_json::from_str(json).context("the trace is not JSON")?;
        let other = &v["otherData"];
        if other["format"] != "workbook-sim-events" {
            bail!("not a simulator event trace (otherData.format)");
        }
        if other["step"] != 0 {
            bail!("not a trace of step 0 (otherData.step = {})", other["step"]);
        }
        let raw = v["traceEvents"]
            .as_array()
            .context("the trace has no traceEvents")?;
        let mut evs: Vec<Ev> = raw
            .iter()
            .filter(|e| e["pid"] == 1 && e["ph"] != "M" && e["ph"] != "C")
            .map(|e| Ev {
                ph: e["ph"].as_str().unwrap_or("").to_string(),
                cat: e["cat"].as_str().unwrap_or("").to_string(),
                name: e["name"].as_str().unwrap_or("").to_string(),
                ts: e["ts"].as_f64().unwrap_or(0.0),
                dur: e["dur"].as_f64().unwrap_or(0.0),
                tid: e["tid"].as_u64().unwrap_or(0),
                barrier: e["args"]["barrier"].as_str().unwrap_or("").to_string(),
                state: e["args"]["state"].as_str().unwrap_or("").to_string(),
            })
            .collect();
        evs.sort_by(|a, b| a.ts.total_cmp(&b.ts));
        let stages = raw
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 1)
            .filter(|e| e["tid"].as_u64().unwrap_or(0) >= 1000)
            .count();
        if stages == 0 {
            bail!("the trace has no ring slots");
        }
        // Warp 0's issues, in program order: a run of TMA loads to one barrier is one k-block;
        // the MMAs up to a commit are one k-block; a commit with no MMAs before it is acc_full's.
        let mut loads: Vec<(f64, f64, usize)> = Vec::new();
        let mut mmas: Vec<(f64, f64)> = Vec::new();
        let mut acc_commit = None;
        let mut first_mma: Option<f64> = None;
        let mut refills = Vec::new();
        let mut arrivals: Vec<(f64, usize)> = Vec::new(); // commit arrivals on load_empty[slot]
        let mut last_load_barrier = String::new();
        for e in evs.iter().filter(|e| e.tid == 0) {
            match (e.ph.as_str(), e.cat.as_str()) {
                ("i", "issue") if e.name.starts_with("TMA load") => {
                    let slot = slot_of(&e.barrier)
                        .with_context(|| format!("a TMA load to {:?}", e.barrier))?;
                    if e.barrier == last_load_barrier {
                        if let Some(l) = loads.last_mut() {
                            l.1 = e.ts;
                        }
                    } else {
                        let j = loads.len();
                        if j >= stages {
                            // The commit that freed this slot last: its n-th arrival on the slot's
                            // empty barrier is k-block slot + n * stages.
                            let n = arrivals.iter().filter(|(_, s)| *s == slot).count();
                            let Some(&(at, _)) = arrivals.iter().rev().find(|(_, s)| *s == slot)
                            else {
                                bail!("k-block {j} refills slot {slot} before any MMA freed it");
                            };
                            refills.push((j, slot + (n - 1) * stages, at));
                        }
                        loads.push((e.ts, e.ts, slot));
                        last_load_barrier = e.barrier.clone();
                    }
                }
                ("i", "issue") if e.name == "tcgen05.mma" => {
                    first_mma.get_or_insert(e.ts);
                }
                ("i", "issue") if e.name == "tcgen05.commit" => match first_mma.take() {
                    Some(start) => mmas.push((start, e.ts)),
                    None => acc_commit = Some(e.ts),
                },
                ("i", "arrive")
                    if e.name.starts_with("commit arrives") && e.barrier.contains("load_empty") =>
                {
                    if let Some(s) = slot_of(&e.barrier) {
                        arrivals.push((e.ts, s));
                    }
                }
                _ => {}
            }
        }
        if loads.is_empty() || loads.len() != mmas.len() {
            bail!(
                "the trace's warp 0 issued loads of {} k-blocks and MMAs of {}",
                loads.len(),
                mmas.len()
            );
        }
        let waits = evs
            .iter()
            .filter(|e| e.tid == 0 && e.ph == "X" && e.cat == "wait")
            .map(|e| (e.ts, e.ts + e.dur, e.barrier.clone()))
            .collect();
        let mut slots = vec![Vec::new(); stages];
        for e in evs.iter().filter(|e| e.ph == "X" && e.cat == "slot") {
            let i = (e.tid as usize).saturating_sub(1000);
            if let Some(s) = slots.get_mut(i) {
                s.push((e.ts, e.ts + e.dur, e.state.clone()));
            }
        }
        let epilogue_waits = evs
            .iter()
            .filter(|e| e.tid != 0 && e.tid < 1000 && e.ph == "X" && e.cat == "wait")
            .map(|e| (e.ts, e.ts + e.dur))
            .collect();
        let ld = |e: &&Ev| e.ph == "i" && e.name == "tcgen05.ld";
        let epilogue_lds = evs
            .iter()
            .filter(|e| e.tid != 0 && e.tid < 1000)
            .filter(ld)
            .map(|e| e.ts)
            .collect();
        let warp0_lds = evs
            .iter()
            .filter(|e| e.tid == 0)
            .filter(ld)
            .map(|e| e.ts)
            .collect();
        let text = |k: &str| match &other[k] {
            Value::String(s) => s.clone(),
            x => x.to_string(),
        };
        Ok(Step0 {
            stages,
            loads,
            mmas,
            acc_commit,
            refills,
            waits,
            slots,
            epilogue_waits,
            epilogue_lds,
            warp0_lds,
            end: other["end"].as_f64().unwrap_or(1.0).max(1.0),
            seed: text("seed"),
            policy: text("policy"),
            verdict: text("verdict"),
        })
    }

    /// k-blocks whose loads warp 0 issued before its first MMA: the prologue's plus the first
    /// refill, `PREFETCH + 1`.
    fn loads_before_first_mma(&self) -> usize {
        let first = self.mmas.first().map_or(0.0, |m| m.0);
        self.loads.iter().filter(|l| l.0 < first).count()
    }

    /// How many k-blocks of MMA lie between each refill and the MMAs it feeds, if all agree.
    pub fn lookahead(&self) -> Option<usize> {
        let mut it = self.refills.iter().map(|(j, i, _)| j - i - 1);
        let first = it.next()?;
        it.all(|x| x == first).then_some(first)
    }
}

/// The trace's structure, without its times: warp 0's issues in order, each slot's states in
/// order, and which MMAs each refill waited for. A fresh trace of the same kernel must have the
/// same structure as the committed one, or the figure is stale. Only
/// `runner/tests/book_step0_figure.rs` calls it (it includes this file by path).
#[allow(dead_code)]
pub fn structure(json: &str) -> Result<Vec<String>> {
    let t = Step0::parse(json)?;
    let mut out = vec![format!("stages {}", t.stages)];
    // Warp 0's program order: loads, MMAs and the final commit, merged by time.
    let mut issues: Vec<(f64, String)> = Vec::new();
    for (k, l) in t.loads.iter().enumerate() {
        issues.push((l.0, format!("load k{k} into slot {}", l.2)));
    }
    for (k, m) in t.mmas.iter().enumerate() {
        issues.push((m.0, format!("mma k{k}")));
    }
    if let Some(c) = t.acc_commit {
        issues.push((c, "commit acc_full".into()));
    }
    issues.sort_by(|a, b| a.0.total_cmp(&b.0));
    out.extend(issues.into_iter().map(|(_, s)| s));
    for (j, i, _) in &t.refills {
        out.push(format!("load k{j} after the MMAs of k{i} completed"));
    }
    for (s, spans) in t.slots.iter().enumerate() {
        let states: Vec<&str> = spans.iter().map(|x| x.2.as_str()).collect();
        out.push(format!("slot {s}: {}", states.join(" ")));
    }
    Ok(out)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `text` cut into lines of at most `width` characters, at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let cur = lines.last_mut().expect("one line at least");
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > width {
            lines.push(word.to_string());
        } else {
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(word);
        }
    }
    lines
}

const LOADING: &str = "#56B4E9";
const FULL: &str = "#009E73";
const READING: &str = "#E69F00";
const EMPTY: &str = "#dddddd";
const MMA: &str = "#0072B2";
const WAIT_EMPTY: &str = "#CC79A7";
const WAIT_FULL: &str = "#999999";
const WAIT_ACC: &str = "#D55E00";

/// The figure, from a `runner step 0 --sim --trace` JSON.
pub fn draw(json: &str) -> Result<String> {
    let t = Step0::parse(json)?;
    let Some(lookahead) = t.lookahead() else {
        bail!("the trace's refills do not all wait the same number of k-blocks back");
    };
    let prefetch = t.loads_before_first_mma().saturating_sub(1);
    let (w, left, right) = (760.0, 150.0, 745.0);
    let row = 24.0;
    let top = 46.0;
    let lanes = 3 + t.stages + 1;
    let x = |ts: f64| left + (right - left) * ts / t.end;
    let mut body = String::new();
    let rect = |b: &mut String, x0: f64, x1: f64, y: f64, fill: &str, tip: &str| {
        let _ = writeln!(
            b,
            "  <rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{fill}\"><title>{}</title></rect>",
            x(x0),
            y + 3.0,
            (x(x1) - x(x0)).max(1.0),
            row - 6.0,
            esc(tip)
        );
    };
    let label = |b: &mut String, cx: f64, y: f64, s: &str, fill: &str| {
        let _ = writeln!(
            b,
            "  <text x=\"{cx:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\" fill=\"{fill}\">{}</text>",
            y + row / 2.0 + 4.0,
            esc(s)
        );
    };
    let names: Vec<String> = ["warp 0: TMA loads", "warp 0: MMAs, commit", "warp 0: waits"]
        .iter()
        .map(|s| s.to_string())
        .chain((0..t.stages).map(|s| format!("slot {s}")))
        .chain(std::iter::once("warps 1–3: epilogue".to_string()))
        .collect();
    for (i, name) in names.iter().enumerate() {
        let y = top + row * i as f64;
        let _ = writeln!(
            body,
            "  <text x=\"8\" y=\"{:.1}\" font-size=\"11\">{}</text>\n  <line x1=\"{left}\" y1=\"{:.1}\" x2=\"{right}\" y2=\"{:.1}\" stroke=\"#eeeeee\"/>",
            y + row / 2.0 + 4.0,
            esc(name),
            y + row,
            y + row
        );
    }
    // Row 0: each k-block's loads, labelled; labels closer than a few pixels merge ("k0–k2").
    let y0 = top;
    let mut groups: Vec<(f64, usize, usize)> = Vec::new(); // (x of the first, first k, last k)
    for (k, l) in t.loads.iter().enumerate() {
        rect(
            &mut body,
            l.0,
            l.1,
            y0,
            LOADING,
            &format!("TMA loads of k-block {k} into slot {}", l.2),
        );
        match groups.last_mut() {
            Some(g) if x(l.0) - g.0 < 16.0 => g.2 = k,
            _ => groups.push((x(l.0), k, k)),
        }
    }
    for (gx, a, b) in &groups {
        let s = if a == b {
            format!("k{a}")
        } else {
            format!("k{a}–k{b}")
        };
        let _ = writeln!(
            body,
            "  <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\">{}</text>",
            gx + 3.0,
            y0 + row / 2.0 + 4.0,
            esc(&s)
        );
    }
    // Row 1: each k-block's MMAs up to its commit; the final commit to acc_full.
    let y1 = top + row;
    for (k, m) in t.mmas.iter().enumerate() {
        rect(
            &mut body,
            m.0,
            m.1,
            y1,
            MMA,
            &format!("MMAs of k-block {k}, then commit"),
        );
        if x(m.1) - x(m.0) >= 14.0 {
            label(
                &mut body,
                (x(m.0) + x(m.1)) / 2.0,
                y1,
                &format!("k{k}"),
                "#ffffff",
            );
        }
    }
    if let Some(c) = t.acc_commit {
        rect(&mut body, c, c, y1, WAIT_ACC, "commit to acc_full");
    }
    // Each refill waits for the commit of the MMAs that last read its slot: drawn as a dashed
    // line from that commit's arrival (row 1) to the load (row 0).
    for (j, i, at) in &t.refills {
        let _ = writeln!(
            body,
            "  <line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#444444\" stroke-dasharray=\"3,2\"><title>{}</title></line>",
            x(*at),
            y1 + row - 3.0,
            x(t.loads[*j].0),
            y0 + row - 3.0,
            esc(&format!("the MMAs of k-block {i} complete: slot {} is free for k-block {j}", t.loads[*j].2))
        );
    }
    // Row 2: warp 0's waits, by barrier, then its own share of the epilogue's loads.
    let y2 = top + 2.0 * row;
    for (a, b, bar) in &t.waits {
        let fill = if bar.contains("load_empty") {
            WAIT_EMPTY
        } else if bar.contains("acc_full") {
            WAIT_ACC
        } else {
            WAIT_FULL
        };
        rect(&mut body, *a, *b, y2, fill, &format!("wait {bar}"));
    }
    for ts in &t.warp0_lds {
        rect(&mut body, *ts, *ts, y2, READING, "tcgen05.ld");
    }
    // Slot rows: state spans; the reading spans labelled with their k-block.
    for (s, spans) in t.slots.iter().enumerate() {
        let y = top + row * (3 + s) as f64;
        let mut reads = 0;
        for (a, b, state) in spans {
            let fill = match state.as_str() {
                "loading" => LOADING,
                "full" => FULL,
                "reading" => READING,
                _ => EMPTY,
            };
            rect(&mut body, *a, *b, y, fill, state);
            if state == "reading" {
                let k = s + reads * t.stages;
                reads += 1;
                if x(*b) - x(*a) >= 14.0 {
                    label(
                        &mut body,
                        (x(*a) + x(*b)) / 2.0,
                        y,
                        &format!("k{k}"),
                        "#000000",
                    );
                }
            }
        }
    }
    // The other warps: waiting on acc_full (overlaid), then their tcgen05.ld.
    let ye = top + row * (3 + t.stages) as f64;
    for (a, b) in &t.epilogue_waits {
        rect(&mut body, *a, *b, ye, WAIT_ACC, "wait acc_full");
    }
    for ts in &t.epilogue_lds {
        rect(&mut body, *ts, *ts, ye, READING, "tcgen05.ld");
    }
    // Legend.
    let yl = top + row * lanes as f64 + 14.0;
    let legend = [
        (LOADING, "TMA loads / slot loading"),
        (FULL, "slot full"),
        (READING, "read by MMAs; tcgen05.ld"),
        (MMA, "MMAs issued"),
        (WAIT_EMPTY, "wait load_empty"),
        (WAIT_FULL, "wait load_full"),
        (WAIT_ACC, "acc_full"),
    ];
    let mut lx = 8.0;
    for (fill, text) in legend {
        let _ = writeln!(
            body,
            "  <rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{fill}\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\">{}</text>",
            yl - 9.0,
            lx + 13.0,
            yl,
            esc(text)
        );
        lx += 16.0 + 5.6 * text.chars().count() as f64;
    }
    // Caption: what the figure shows, every number from the trace.
    let k = t.loads.len();
    let caption = format!(
        "Warp 0 first refills: the loads of k-block kb + {prefetch} wait until the MMAs that last read \
         that slot complete (dashed lines). Then it waits on load_full of kb and issues its MMAs. \
         So each load is issued {lookahead} k-blocks of MMA ahead of the MMAs that read it, \
         STAGES − 1 with {stages} stages. The other warps wait on acc_full until the last commit, \
         then read the accumulator. Time is the simulator's step count (order, not speed): \
         simulated, not measured.",
        stages = t.stages
    );
    let mut yc = yl + 20.0;
    for line in wrap(&caption, 135) {
        let _ = writeln!(
            body,
            "  <text x=\"8\" y=\"{yc:.1}\" font-size=\"11\" fill=\"#333333\">{}</text>",
            esc(&line)
        );
        yc += 14.0;
    }
    let h = (yc + 4.0).ceil();
    let title = format!(
        "Step 0, one CTA, simulated: {k} k-blocks, {} stages, prefetch {prefetch}",
        t.stages
    );
    let source = format!(
        "the simulator's trace (seed {}, {} schedule, {}): {TRACE}, written by {REGENERATE}",
        t.seed, t.policy, t.verdict
    );
    Ok(format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">\n  <title>{t}</title>\n  <rect width=\"{w}\" height=\"{h}\" fill=\"#ffffff\"/>\n  <text x=\"8\" y=\"20\" font-size=\"13\" font-weight=\"bold\">{t}</text>\n  <text x=\"8\" y=\"36\" font-size=\"10\" fill=\"#555555\">{s}</text>\n{body}</svg>\n",
        t = esc(&title),
        s = esc(&source)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-made trace of two stages and three k-blocks: k-block 2 refills slot 0 after the
    /// MMAs of k-block 0 complete.
    fn tiny(refill_after: &str) -> String {
        format!(
            r#"{{"traceEvents":[
{{"ph":"M","name":"thread_name","pid":1,"tid":1000,"args":{{"name":"slot 0"}}}},
{{"ph":"M","name":"thread_name","pid":1,"tid":1001,"args":{{"name":"slot 1"}}}},
{{"ph":"i","cat":"issue","name":"TMA load -> smem.load_full[0]","ts":1,"pid":1,"tid":0,"args":{{"barrier":"smem.load_full[0]"}}}},
{{"ph":"i","cat":"issue","name":"TMA load -> smem.load_full[1]","ts":2,"pid":1,"tid":0,"args":{{"barrier":"smem.load_full[1]"}}}},
{{"ph":"i","cat":"issue","name":"tcgen05.mma","ts":3,"pid":1,"tid":0,"args":{{}}}},
{{"ph":"i","cat":"issue","name":"tcgen05.commit","ts":4,"pid":1,"tid":0,"args":{{}}}},
{{"ph":"i","cat":"arrive","name":"commit arrives on smem.load_empty[{refill_after}]","ts":5,"pid":1,"tid":0,"args":{{"barrier":"smem.load_empty[{refill_after}]"}}}},
{{"ph":"i","cat":"issue","name":"TMA load -> smem.load_full[0]","ts":6,"pid":1,"tid":0,"args":{{"barrier":"smem.load_full[0]"}}}},
{{"ph":"i","cat":"issue","name":"tcgen05.mma","ts":7,"pid":1,"tid":0,"args":{{}}}},
{{"ph":"i","cat":"issue","name":"tcgen05.commit","ts":8,"pid":1,"tid":0,"args":{{}}}},
{{"ph":"i","cat":"issue","name":"tcgen05.mma","ts":9,"pid":1,"tid":0,"args":{{}}}},
{{"ph":"i","cat":"issue","name":"tcgen05.commit","ts":10,"pid":1,"tid":0,"args":{{}}}},
{{"ph":"i","cat":"issue","name":"tcgen05.commit","ts":11,"pid":1,"tid":0,"args":{{}}}},
{{"ph":"X","cat":"slot","name":"loading","ts":1,"dur":2,"pid":1,"tid":1000,"args":{{"state":"loading"}}}},
{{"ph":"X","cat":"slot","name":"reading","ts":3,"dur":2,"pid":1,"tid":1000,"args":{{"state":"reading"}}}}
],"otherData":{{"format":"workbook-sim-events","step":0,"end":12,"seed":1,"policy":"random","verdict":"PASS"}}}}"#
        )
    }

    #[test]
    fn reads_the_ring_and_the_lookahead_from_a_trace() {
        let t = Step0::parse(&tiny("0")).unwrap();
        assert_eq!((t.stages, t.loads.len(), t.mmas.len()), (2, 3, 3));
        assert_eq!(t.acc_commit, Some(11.0));
        assert_eq!(t.refills.len(), 1);
        assert_eq!((t.refills[0].0, t.refills[0].1), (2, 0));
        assert_eq!(t.lookahead(), Some(1), "STAGES - 1 with two stages");
        let s = structure(&tiny("0")).unwrap();
        assert_eq!(s[0], "stages 2");
        assert!(
            s.contains(&"load k2 after the MMAs of k0 completed".to_string()),
            "{s:?}"
        );
        assert!(s.contains(&"slot 0: loading reading".to_string()), "{s:?}");
        let svg = draw(&tiny("0")).unwrap();
        assert!(svg.contains("1 k-blocks of MMA ahead"), "{svg}");
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
    }

    #[test]
    fn a_refill_before_its_slot_was_freed_is_an_error() {
        // The commit frees slot 1, yet k-block 2 refills slot 0: the trace contradicts the ring.
        assert!(Step0::parse(&tiny("1")).is_err());
        assert!(draw("not json").is_err());
        assert!(draw(&tiny("0").replace("\"step\":0", "\"step\":3")).is_err());
    }

    #[test]
    fn captions_wrap_at_spaces() {
        let lines = wrap("aaa bbb ccc ddd", 7);
        assert_eq!(lines, vec!["aaa bbb", "ccc ddd"]);
    }
}

//! `runner step N --sim --trace`: the simulator's event trace (`sim::trace_events`, Chrome
//! trace-event JSON, the file the book's ring player loads) drawn as an SVG: one row per warp
//! and per ring slot of the first cluster, over simulated time (scheduler steps).

use anyhow::{Context, Result};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The colour-blind-safe palette (Okabe and Ito) the book's player uses too.
fn fill(cat: &str, name: &str, state: Option<&str>) -> &'static str {
    match (cat, state) {
        ("slot", Some("loading")) => "#56B4E9",
        ("slot", Some("full")) => "#009E73",
        ("slot", Some("reading")) => "#E69F00",
        ("slot", _) => "#dddddd",
        ("wait", _) if name.contains("still blocked") => "#D55E00",
        ("wait", _) => "#999999",
        _ => "#0072B2",
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The SVG of an event trace's JSON text.
pub fn svg(json: &str) -> Result<String> {
    let v: Value = serde_json::from_str(json).context("the event trace is not JSON")?;
    let evs = v["traceEvents"]
        .as_array()
        .context("the event trace has no traceEvents")?;
    let end = v["otherData"]["end"].as_u64().unwrap_or(1).max(1) as f64;
    // Lanes: (pid, tid) -> name, in order.
    let mut lanes: BTreeMap<(u64, u64), String> = BTreeMap::new();
    for e in evs {
        if e["ph"] == "M" && e["name"] == "thread_name" {
            let key = (
                e["pid"].as_u64().unwrap_or(0),
                e["tid"].as_u64().unwrap_or(0),
            );
            let name = e["args"]["name"].as_str().unwrap_or("").to_string();
            lanes.insert(key, format!("CTA {} {name}", key.0.saturating_sub(1)));
        }
    }
    let row = 22.0;
    let (left, width) = (230.0, 900.0);
    let top = 40.0;
    let height = top + row * lanes.len() as f64 + 40.0;
    let x = |ts: f64| left + width * ts / end;
    let index: BTreeMap<(u64, u64), usize> =
        lanes.keys().enumerate().map(|(i, k)| (*k, i)).collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="sans-serif" font-size="11">"#,
        left + width + 20.0
    );
    let title = format!(
        "simulated step {} ({}), seed {} policy {}: {}",
        v["otherData"]["step"],
        v["otherData"]["kernel"].as_str().unwrap_or(""),
        v["otherData"]["seed"],
        v["otherData"]["policy"].as_str().unwrap_or(""),
        v["otherData"]["verdict"].as_str().unwrap_or("")
    );
    let _ = writeln!(
        out,
        r#"<text x="8" y="16" font-size="13">{}</text>"#,
        esc(&title)
    );
    let _ = writeln!(
        out,
        r##"<text x="8" y="32" fill="#555">time: simulator steps 0..{end} (order, not speed); first cluster only</text>"##
    );
    for (i, name) in lanes.values().enumerate() {
        let y = top + row * i as f64;
        let _ = writeln!(
            out,
            r##"<text x="8" y="{}">{}</text><line x1="{left}" x2="{}" y1="{}" y2="{}" stroke="#eee"/>"##,
            y + 15.0,
            esc(name),
            left + width,
            y + row,
            y + row
        );
    }
    for e in evs {
        let key = (
            e["pid"].as_u64().unwrap_or(0),
            e["tid"].as_u64().unwrap_or(0),
        );
        let ts = e["ts"].as_f64().unwrap_or(0.0);
        let (cat, name) = (
            e["cat"].as_str().unwrap_or(""),
            e["name"].as_str().unwrap_or(""),
        );
        match e["ph"].as_str() {
            Some("X") => {
                let Some(&i) = index.get(&key) else { continue };
                let y = top + row * i as f64 + 3.0;
                let w = (x(ts + e["dur"].as_f64().unwrap_or(0.0)) - x(ts)).max(0.5);
                let _ = writeln!(
                    out,
                    r##"<rect x="{:.1}" y="{y}" width="{w:.1}" height="{}" fill="{}"><title>{}</title></rect>"##,
                    x(ts),
                    row - 6.0,
                    fill(cat, name, e["args"]["state"].as_str()),
                    esc(name)
                );
            }
            Some("i") if cat == "stop" => {
                let _ = writeln!(
                    out,
                    r##"<line x1="{0:.1}" x2="{0:.1}" y1="{top}" y2="{1}" stroke="#D55E00" stroke-width="2"/><text x="{0:.1}" y="{2}" fill="#D55E00" text-anchor="end">{3}</text>"##,
                    x(ts),
                    height - 30.0,
                    height - 14.0,
                    esc(name)
                );
            }
            Some("i") => {
                let Some(&i) = index.get(&key) else { continue };
                let y = top + row * i as f64;
                let _ = writeln!(
                    out,
                    r##"<line x1="{0:.1}" x2="{0:.1}" y1="{1}" y2="{2}" stroke="{3}"><title>{4}</title></line>"##,
                    x(ts),
                    y + 2.0,
                    y + row - 2.0,
                    if cat == "arrive" {
                        "#CC79A7"
                    } else {
                        "#0072B2"
                    },
                    esc(name)
                );
            }
            _ => {}
        }
    }
    out.push_str("</svg>\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_lanes_spans_and_the_stop() {
        let j = r#"{"traceEvents":[
{"ph":"M","name":"thread_name","pid":1,"tid":0,"args":{"name":"warp 0: producer"}},
{"ph":"X","cat":"wait","name":"wait load_empty[0]","ts":5,"dur":10,"pid":1,"tid":0,"args":{}},
{"ph":"i","cat":"issue","name":"TMA load -> load_full[0]","ts":20,"pid":1,"tid":0,"args":{}},
{"ph":"i","s":"g","cat":"stop","name":"stopped: rule operand-loaded","ts":30,"pid":1,"tid":0,"args":{}}
],"otherData":{"end":30,"step":0,"kernel":"k.cu","seed":1,"policy":"random","verdict":"rule"}}"#;
        let s = svg(j).unwrap();
        assert!(s.contains("warp 0: producer"));
        assert!(s.contains("wait load_empty[0]"));
        assert!(s.contains("stopped: rule operand-loaded"));
        assert!(svg("not json").is_err());
    }
}

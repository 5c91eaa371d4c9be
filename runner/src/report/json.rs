//! The `--json` contract for scripts: one object `{"schema": "workbook-runs/1", "runner":
//! {version, commit}, "runs": [...]}` ([`super::envelope`]),
//! each run naming its kernel by the architecture strings the CLI takes (`"arch": "sm_100a"`,
//! `"kernel": "blackwell"`), its build target as `"sm_90a"`/`"sm_100a"` with `"emulated"`, and its
//! parameters as an object (`{"tile_m": 128, ...}`). A test holds the schema.

use common::step::Arch;
use serde_json::{Map, Value};

/// The whole output of a command that reports runs.
pub fn runs(runs: Vec<Value>) -> Value {
    super::envelope("runs", serde_json::json!({ "runs": runs }))
}

/// Rewrite one run (or compile report) into the contract's shape, recursively.
pub fn normalise(v: &mut Value) {
    let Value::Object(o) = v else { return };
    if let Some((sm, kernel)) = o.get("arch").and_then(Value::as_str).and_then(arch_of) {
        o.insert("kernel".into(), Value::from(kernel));
        o.insert("arch".into(), Value::from(sm));
    }
    if let Some((sm, emulated)) = o.get("target").and_then(Value::as_str).and_then(target_of) {
        o.insert("target".into(), Value::from(sm));
        o.entry("emulated").or_insert(Value::from(emulated));
    }
    if let Some(Value::Array(pairs)) = o.get("params") {
        let obj: Option<Map<String, Value>> = pairs
            .iter()
            .map(|p| match p {
                Value::Array(kv) if kv.len() == 2 => {
                    Some((kv[0].as_str()?.to_string(), kv[1].clone()))
                }
                _ => None,
            })
            .collect();
        if let Some(obj) = obj {
            o.insert("params".into(), Value::Object(obj));
        }
    }
    if let Some(inner) = o.get_mut("compile") {
        normalise(inner);
    }
}

/// Serde writes an `Arch` as "blackwell"/"hopper"; the CLI's names are the sm strings.
fn arch_of(s: &str) -> Option<(&'static str, &'static str)> {
    match s {
        "blackwell" | "Blackwell" | "sm_100a" => Some((Arch::Blackwell.sm(), "blackwell")),
        "hopper" | "Hopper" | "sm_90a" => Some((Arch::Hopper.sm(), "hopper")),
        _ => None,
    }
}

fn target_of(s: &str) -> Option<(&'static str, bool)> {
    match s {
        "Sm100a" | "sm_100a" => Some(("sm_100a", false)),
        "Sm90a" | "sm_90a" => Some(("sm_90a", false)),
        "Sm90aEmulated" => Some(("sm_90a", true)),
        _ => None,
    }
}

//! Pieces of the result document (`shared/bench-schema.md`, "sagitta-bench/1"): machine
//! information, the UTC start time, the command line, and one run entry per phase.

use serde_json::{json, Value};

use crate::search::PhaseResult;

pub const SCHEMA: &str = "sagitta-bench/1";
pub const SUITE: &str = "server-load";

/// `{cpu_model, cores, simd, memory_bytes}` from `/proc/cpuinfo` and `/proc/meminfo`, with
/// the same SIMD names as the Python harness (`bench/report.py`).
pub fn machine_info() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |key: &str| {
        cpuinfo.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            (name.trim() == key).then(|| value.trim().to_string())
        })
    };
    let cpu_model = field("model name")
        .or_else(|| field("Hardware"))
        .unwrap_or_else(|| "unknown".to_string());
    let flags = format!(
        "{} {}",
        field("flags").unwrap_or_default(),
        field("Features").unwrap_or_default()
    );
    let memory_bytes = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|line| line.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024);
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    json!({
        "cpu_model": cpu_model,
        "cores": cores,
        "simd": simd_from_flags(&flags),
        "memory_bytes": memory_bytes,
        "simd_source": "/proc/cpuinfo flags",
    })
}

pub fn simd_from_flags(flags: &str) -> &'static str {
    let has = |name: &str| flags.split_whitespace().any(|flag| flag == name);
    if has("avx512_vnni") {
        "avx512-vnni"
    } else if has("avx512f") {
        "avx512"
    } else if has("avx2") {
        "avx2"
    } else if has("asimd") || has("neon") {
        "neon"
    } else {
        "scalar"
    }
}

pub use sagitta_storage::utc::utc_timestamp;

pub fn utc_now() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_timestamp(seconds)
}

/// The arguments joined with spaces, single-quoting any that the shell would split or
/// expand.
pub fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|arg| {
            let plain = !arg.is_empty()
                && arg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@%+".contains(c));
            if plain {
                arg.clone()
            } else {
                format!("'{}'", arg.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `value` rounded to `digits` decimals.
pub fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

fn latency_json(phase: &PhaseResult) -> Value {
    // The schema requires numbers; with no successful request there is no latency, and the
    // errors field says why.
    let summary = phase.latency_ms.unwrap_or_default();
    json!({
        "p50": round(summary.p50, 4),
        "p95": round(summary.p95, 4),
        "p99": round(summary.p99, 4),
        "mean": round(summary.mean, 4),
        "max": round(summary.max, 4),
    })
}

fn cpu_json(phase: &PhaseResult) -> Value {
    let utilization =
        |seconds: Option<f64>| seconds.map(|s| round(s / phase.wall_seconds.max(1e-9), 3));
    json!({
        "load_generator_cpu_seconds": phase.client_cpu_seconds.map(|s| round(s, 3)),
        "load_generator_cores_busy": utilization(phase.client_cpu_seconds),
        "server_cpu_seconds": phase.server_cpu_seconds.map(|s| round(s, 3)),
        "server_cores_busy": utilization(phase.server_cpu_seconds),
    })
}

/// One `runs` entry (scenario "read-only") for a query phase, with an optional GET baseline
/// phase at the same concurrency.
pub fn run_entry(
    phase: &PhaseResult,
    search_params: &Value,
    threads: usize,
    baseline: Option<(&str, &PhaseResult)>,
) -> Value {
    let mut entry = json!({
        "scenario": "read-only",
        "search_params": search_params,
        "threads": threads,
        "concurrency": phase.concurrency,
        "recall_at_k": round(phase.precision.unwrap_or(0.0), 5),
        "qps": round(phase.qps(), 2),
        "latency_ms": latency_json(phase),
        "disk_bytes_read_per_query": null,
        "errors": phase.errors,
        "requests": phase.requests,
        "successful_requests": phase.ok,
        "wall_seconds": round(phase.wall_seconds, 4),
        "errors_by_kind": phase.errors_by_kind,
        "error_samples": phase.error_samples,
        "warmup_requests": phase.warmup_requests,
        "warmup_errors": phase.warmup_errors,
        "connections_opened_warmup": phase.connections_warmup,
        "connections_opened_timed": phase.connections_timed,
        "cpu": cpu_json(phase),
    });
    if phase.precision.is_none() {
        entry["recall_note"] = json!("no successful query: recall_at_k is 0 by convention");
    }
    if let Some((key, baseline)) = baseline {
        entry[key] = json!({
            "requests": baseline.requests,
            "errors": baseline.errors,
            "qps": round(baseline.qps(), 2),
            "latency_ms": latency_json(baseline),
            "cpu": cpu_json(baseline),
        });
    }
    entry
}

/// The line printed for a phase.
pub fn phase_line(label: &str, phase: &PhaseResult) -> String {
    let summary = phase.latency_ms.unwrap_or_default();
    let mut line = format!(
        "{label} C={:<5} {:>7} req in {:>7.3} s = {:>10.1} RPS | latency ms p50 {:.3} p95 {:.3} \
         p99 {:.3} max {:.3}",
        phase.concurrency,
        phase.requests,
        phase.wall_seconds,
        phase.qps(),
        summary.p50,
        summary.p95,
        summary.p99,
        summary.max,
    );
    if let Some(precision) = phase.precision {
        line.push_str(&format!(" | precision {precision:.4}"));
    }
    line.push_str(&format!(
        " | errors {} | connections {}+{}",
        phase.errors, phase.connections_warmup, phase.connections_timed
    ));
    if let Some(cpu) = phase.client_cpu_seconds {
        line.push_str(&format!(
            " | cores busy: loadgen {:.2}",
            cpu / phase.wall_seconds.max(1e-9)
        ));
        if let Some(server) = phase.server_cpu_seconds {
            line.push_str(&format!(
                ", server {:.2}",
                server / phase.wall_seconds.max(1e-9)
            ));
        }
    }
    if !phase.errors_by_kind.is_empty() {
        line.push_str(&format!(" | {:?}", phase.errors_by_kind));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_join_quotes_when_needed() {
        let args = ["sagitta-load", "--out", "a b.json", "--x", "it's", "1,64"].map(String::from);
        assert_eq!(
            shell_join(&args),
            r"sagitta-load --out 'a b.json' --x 'it'\''s' 1,64"
        );
    }

    #[test]
    fn simd_names_follow_the_python_harness() {
        assert_eq!(
            simd_from_flags("fpu avx2 avx512f avx512_vnni"),
            "avx512-vnni"
        );
        assert_eq!(simd_from_flags("fpu avx2 avx512f"), "avx512");
        assert_eq!(simd_from_flags("sse4_2 avx2"), "avx2");
        assert_eq!(simd_from_flags("fp asimd"), "neon");
        assert_eq!(simd_from_flags(""), "scalar");
        let machine = machine_info();
        assert!(machine["cores"].as_u64().unwrap() >= 1);
    }

    #[test]
    fn run_entry_has_the_schema_fields() {
        let phase = PhaseResult {
            concurrency: 4,
            requests: 10,
            ok: 9,
            errors: 1,
            wall_seconds: 0.5,
            precision: Some(0.95),
            latency_ms: Some(crate::stats::Summary {
                p50: 1.0,
                p95: 2.0,
                p99: 3.0,
                mean: 1.2,
                max: 4.0,
            }),
            ..PhaseResult::default()
        };
        let entry = run_entry(&phase, &json!({"hnsw_ef": 64}), 2, None);
        assert_eq!(entry["scenario"], "read-only");
        assert_eq!(entry["concurrency"], 4);
        assert_eq!(entry["threads"], 2);
        assert_eq!(entry["qps"], 20.0);
        assert_eq!(entry["errors"], 1);
        assert_eq!(entry["recall_at_k"], 0.95);
        assert_eq!(entry["latency_ms"]["p99"], 3.0);
        assert!(entry["disk_bytes_read_per_query"].is_null());
    }
}

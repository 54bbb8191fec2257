//! SagittaDB command-line tool, library part: the input readers of `sagitta import`
//! (`.npy`, `.fvecs` / `.bvecs`, Parquet), the logger of `sagitta serve` and the report of
//! `sagitta topology`. The binary (`src/main.rs`) parses the command line
//! and hands the points read to the engine.
#![deny(unsafe_code)]

pub mod logger;
pub mod readers;

use sagitta_engine::machine::{Placement, ShardPlacement};
use sagitta_engine::topology::{format_cpu_list, Source, Topology};

/// `sagitta topology`'s text: one line per node (kind, CPUs, memory, distances), then
/// where each shard of a collection with `placement` runs.
pub fn topology_text(topology: &Topology, placement: Placement, placed: &ShardPlacement) -> String {
    let source = match &topology.source {
        Source::Sysfs => "sysfs".to_string(),
        Source::Fallback(reason) => format!("one node assumed ({reason})"),
        Source::Simulated => "simulated".to_string(),
    };
    let mut lines = vec![format!(
        "{} nodes ({} with CPUs this process may use, {} memory-only), {} CPUs; from {source}",
        topology.nodes.len(),
        topology.compute_nodes().count(),
        topology.memory_nodes().count(),
        topology.cpu_count(),
    )];
    for node in &topology.nodes {
        let distances: Vec<String> = node.distances.iter().map(u32::to_string).collect();
        lines.push(format!(
            "node {}: {}, cpus [{}], {} MiB, distances {}",
            node.id,
            node.kind().name(),
            format_cpu_list(&node.cpus),
            node.memory_bytes >> 20,
            distances.join(" "),
        ));
    }
    let shards: Vec<String> = placed
        .nodes
        .iter()
        .enumerate()
        .zip(&placed.far_nodes)
        .map(|((shard, node), far)| match far {
            Some(far) => format!("shard {shard} → node {node} (far tier node {far})"),
            None => format!("shard {shard} → node {node}"),
        })
        .collect();
    lines.push(format!(
        "placement {}: {}",
        placement.name(),
        shards.join(", ")
    ));
    if let Some(note) = &placed.note {
        lines.push(format!("note: {note}"));
    }
    lines.join("\n")
}

//! The machine's NUMA topology, read once at start from Linux's sysfs: its nodes, the
//! CPUs of each this process may use, each node's memory and the distance table between
//! nodes (ACPI SLIT units: 10 is local). A node with memory and no CPUs is a far memory
//! tier (CXL-attached memory, or a socket's high-bandwidth memory). Where the kernel has no
//! NUMA directory (a non-NUMA kernel, or not Linux) the machine is one node holding every
//! CPU the process may use.

use std::fmt;
use std::path::Path;

/// One NUMA node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumaNode {
    /// The kernel's node number (`nodeN`).
    pub id: usize,
    /// The CPUs of this node the process may run on, ascending (its affinity mask applied).
    pub cpus: Vec<usize>,
    /// Whether the kernel lists CPUs on this node at all (whether or not the process may
    /// use them): a node without is a memory-only tier.
    pub has_cpus: bool,
    /// The node's memory (`MemTotal` of its meminfo).
    pub memory_bytes: u64,
    /// Distance to each node, in the order of [`Topology::nodes`].
    pub distances: Vec<u32>,
}

impl NumaNode {
    /// What the node is to this process: where its work runs, far memory, or neither.
    pub fn kind(&self) -> NodeKind {
        match (self.has_cpus, self.cpus.is_empty()) {
            (true, false) => NodeKind::Compute,
            (true, true) => NodeKind::Excluded,
            (false, _) => NodeKind::Memory,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKind {
    /// CPUs this process may use: a worker pool runs there.
    Compute,
    /// CPUs, none of them allowed to this process (a cpuset or `taskset` excludes them).
    Excluded,
    /// Memory without CPUs: a far tier.
    Memory,
}

impl NodeKind {
    pub fn name(self) -> &'static str {
        match self {
            NodeKind::Compute => "compute",
            NodeKind::Excluded => "excluded",
            NodeKind::Memory => "memory-only",
        }
    }
}

/// Where a topology came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// Read from sysfs.
    Sysfs,
    /// One node of every allowed CPU, because sysfs could not be read; the reason.
    Fallback(String),
    /// Made up for tests and benchmarks: `nodes` nodes over this machine's CPUs.
    Simulated,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Every node, by ascending id.
    pub nodes: Vec<NumaNode>,
    pub source: Source,
}

/// Why a sysfs tree could not be read as a topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyError {
    /// The file, relative to the tree's root.
    pub file: String,
    pub reason: String,
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.file, self.reason)
    }
}

const NODE_DIR: &str = "devices/system/node";
const ONLINE_CPUS: &str = "devices/system/cpu/online";

impl Topology {
    /// This machine's topology as the process may use it: sysfs under `/sys`, each node's
    /// CPUs narrowed to the process's affinity mask; one node of every allowed CPU when
    /// sysfs cannot be read (the reason kept in [`Source::Fallback`]).
    pub fn detect() -> Topology {
        let allowed = sagitta_kernels::sched::allowed_cpus();
        match Topology::read(Path::new("/sys"), allowed.as_deref()) {
            Ok(topology) if topology.compute_nodes().next().is_some() => topology,
            Ok(_) => Topology::fallback(allowed, "no node holds a CPU this process may use"),
            Err(error) => Topology::fallback(allowed, &error.to_string()),
        }
    }

    /// The topology a sysfs tree rooted at `root` describes (`root` holds `devices/`),
    /// each node's CPUs narrowed to `allowed` when given. A tree without a node directory
    /// is one node holding the online CPUs.
    pub fn read(root: &Path, allowed: Option<&[usize]>) -> Result<Topology, TopologyError> {
        let keep = |cpus: Vec<usize>| -> Vec<usize> {
            match allowed {
                Some(allowed) => cpus
                    .into_iter()
                    .filter(|cpu| allowed.contains(cpu))
                    .collect(),
                None => cpus,
            }
        };
        let node_dir = root.join(NODE_DIR);
        if !node_dir.is_dir() {
            let online = parse_cpu_list(&read_text(root, ONLINE_CPUS)?)
                .map_err(|reason| error(ONLINE_CPUS, reason))?;
            return Ok(Topology {
                nodes: vec![one_node(keep(online), 0)],
                source: Source::Sysfs,
            });
        }
        let ids = node_ids(&node_dir)?;
        let mut nodes = Vec::with_capacity(ids.len());
        for &id in &ids {
            let file = |name: &str| format!("{NODE_DIR}/node{id}/{name}");
            let listed = parse_cpu_list(&read_text(root, &file("cpulist"))?)
                .map_err(|reason| error(&file("cpulist"), reason))?;
            let memory_bytes = parse_mem_total(&read_text(root, &file("meminfo"))?)
                .map_err(|reason| error(&file("meminfo"), reason))?;
            let distances = parse_distances(&read_text(root, &file("distance"))?, ids.len())
                .map_err(|reason| error(&file("distance"), reason))?;
            nodes.push(NumaNode {
                id,
                has_cpus: !listed.is_empty(),
                cpus: keep(listed),
                memory_bytes,
                distances,
            });
        }
        Ok(Topology {
            nodes,
            source: Source::Sysfs,
        })
    }

    /// One node holding `allowed` (every CPU `available_parallelism` counts when the
    /// kernel did not say), for machines whose sysfs cannot be read.
    fn fallback(allowed: Option<Vec<usize>>, reason: &str) -> Topology {
        let cpus = allowed.unwrap_or_else(|| (0..available_cores()).collect());
        Topology {
            nodes: vec![one_node(cpus, 0)],
            source: Source::Fallback(reason.to_string()),
        }
    }

    /// `nodes` compute nodes made up over this process's CPUs, for tests and benchmarks
    /// of placement on a machine with fewer nodes: CPU `i` of the allowed list goes to
    /// node `i mod nodes`, and when there are fewer CPUs than nodes, node `j` shares CPU
    /// `j mod cpus` with others. Distances 10 to itself, 21 to the others.
    pub fn simulated(nodes: usize) -> Topology {
        let nodes = nodes.max(1);
        let allowed = sagitta_kernels::sched::allowed_cpus()
            .filter(|cpus| !cpus.is_empty())
            .unwrap_or_else(|| (0..available_cores()).collect());
        let made = (0..nodes)
            .map(|node| {
                let mut cpus: Vec<usize> =
                    allowed.iter().copied().skip(node).step_by(nodes).collect();
                if cpus.is_empty() {
                    cpus.push(allowed[node % allowed.len()]);
                }
                NumaNode {
                    id: node,
                    cpus,
                    has_cpus: true,
                    memory_bytes: 0,
                    distances: (0..nodes)
                        .map(|other| if other == node { 10 } else { 21 })
                        .collect(),
                }
            })
            .collect();
        Topology {
            nodes: made,
            source: Source::Simulated,
        }
    }

    /// The nodes a worker pool runs on, by ascending id.
    pub fn compute_nodes(&self) -> impl Iterator<Item = &NumaNode> {
        self.nodes
            .iter()
            .filter(|node| node.kind() == NodeKind::Compute)
    }

    /// The memory-only nodes (far tiers), by ascending id.
    pub fn memory_nodes(&self) -> impl Iterator<Item = &NumaNode> {
        self.nodes
            .iter()
            .filter(|node| node.kind() == NodeKind::Memory)
    }

    /// Every CPU of every node this process may use.
    pub fn cpu_count(&self) -> usize {
        self.nodes.iter().map(|node| node.cpus.len()).sum()
    }

    /// The topology as `sagitta topology --json` prints it and telemetry reports it.
    pub fn to_json(&self) -> serde_json::Value {
        let (source, reason) = match &self.source {
            Source::Sysfs => ("sysfs", None),
            Source::Fallback(reason) => ("fallback", Some(reason.clone())),
            Source::Simulated => ("simulated", None),
        };
        let nodes: Vec<serde_json::Value> = self
            .nodes
            .iter()
            .map(|node| {
                serde_json::json!({
                    "id": node.id,
                    "kind": node.kind().name(),
                    "cpus": format_cpu_list(&node.cpus),
                    "cpu_count": node.cpus.len(),
                    "memory_bytes": node.memory_bytes,
                    "distances": node.distances,
                })
            })
            .collect();
        serde_json::json!({
            "source": source,
            "fallback_reason": reason,
            "nodes": nodes,
            "compute_nodes": self.compute_nodes().count(),
            "memory_only_nodes": self.memory_nodes().count(),
            "cpus": self.cpu_count(),
        })
    }
}

/// `cpus` (ascending) in the kernel's list format, runs as ranges: `0-3,8`.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut at = 0;
    while at < cpus.len() {
        let mut end = at;
        while end + 1 < cpus.len() && cpus[end + 1] == cpus[end] + 1 {
            end += 1;
        }
        parts.push(if end == at {
            cpus[at].to_string()
        } else {
            format!("{}-{}", cpus[at], cpus[end])
        });
        at = end + 1;
    }
    parts.join(",")
}

/// The CPUs `available_parallelism` counts (for when the kernel gives no affinity mask).
pub(crate) fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

fn one_node(cpus: Vec<usize>, memory_bytes: u64) -> NumaNode {
    NumaNode {
        id: 0,
        has_cpus: true,
        cpus,
        memory_bytes,
        distances: vec![10],
    }
}

fn error(file: &str, reason: impl Into<String>) -> TopologyError {
    TopologyError {
        file: file.to_string(),
        reason: reason.into(),
    }
}

fn read_text(root: &Path, file: &str) -> Result<String, TopologyError> {
    std::fs::read_to_string(root.join(file)).map_err(|io| error(file, io.to_string()))
}

/// The node numbers of the `nodeN` directories, ascending.
fn node_ids(node_dir: &Path) -> Result<Vec<usize>, TopologyError> {
    let entries = std::fs::read_dir(node_dir).map_err(|io| error(NODE_DIR, io.to_string()))?;
    let mut ids: Vec<usize> = entries
        .filter_map(|entry| {
            let name = entry.ok()?.file_name();
            name.to_str()?.strip_prefix("node")?.parse().ok()
        })
        .collect();
    ids.sort_unstable();
    if ids.is_empty() {
        return Err(error(NODE_DIR, "no nodeN directory"));
    }
    Ok(ids)
}

/// The kernel's CPU list format: comma-separated numbers and inclusive ranges
/// (`0-3,8-11`); an empty list (a node without CPUs) is empty.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|part| !part.is_empty()) {
        let number = |text: &str| -> Result<usize, String> {
            text.parse::<usize>()
                .ok()
                .filter(|&cpu| cpu < sagitta_kernels::sched::MAX_CPUS)
                .ok_or_else(|| {
                    format!(
                        "{text:?} in {part:?} is not a CPU number below {}",
                        sagitta_kernels::sched::MAX_CPUS
                    )
                })
        };
        match part.split_once('-') {
            Some((first, last)) => {
                let (first, last) = (number(first)?, number(last)?);
                if first > last {
                    return Err(format!("range {part:?} runs backwards"));
                }
                cpus.extend(first..=last);
            }
            None => cpus.push(number(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// `MemTotal` of a node's meminfo (`Node 0 MemTotal:  16318720 kB`), in bytes.
fn parse_mem_total(text: &str) -> Result<u64, String> {
    let line = text
        .lines()
        .find(|line| line.contains("MemTotal:"))
        .ok_or("no MemTotal line")?;
    let kilobytes = line
        .split_whitespace()
        .skip_while(|word| *word != "MemTotal:")
        .nth(1)
        .and_then(|value| value.parse::<u64>().ok())
        .ok_or_else(|| format!("MemTotal line {line:?} has no number of kB"))?;
    kilobytes
        .checked_mul(1024)
        .ok_or_else(|| format!("MemTotal {kilobytes} kB overflows"))
}

/// A node's distance row: one number per node.
fn parse_distances(text: &str, nodes: usize) -> Result<Vec<u32>, String> {
    let row = text
        .split_whitespace()
        .map(|word| {
            word.parse::<u32>()
                .map_err(|_| format!("{word:?} is not a distance"))
        })
        .collect::<Result<Vec<u32>, String>>()?;
    if row.len() != nodes {
        return Err(format!("{} distances for {nodes} nodes", row.len()));
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::{format_cpu_list, parse_cpu_list};

    #[test]
    fn cpu_lists_in_the_kernels_format() {
        for list in ["0-3,8-11", "5", "", "0,2,4-6"] {
            assert_eq!(format_cpu_list(&parse_cpu_list(list).unwrap()), list);
        }
        assert_eq!(
            parse_cpu_list("0-3,8-11\n").unwrap(),
            vec![0, 1, 2, 3, 8, 9, 10, 11]
        );
        assert_eq!(parse_cpu_list("5").unwrap(), vec![5]);
        assert_eq!(parse_cpu_list("\n").unwrap(), Vec::<usize>::new());
        assert!(parse_cpu_list("3-1").unwrap_err().contains("backwards"));
        assert!(parse_cpu_list("a").unwrap_err().contains("\"a\""));
        assert!(parse_cpu_list("0-5000").is_err());
    }
}

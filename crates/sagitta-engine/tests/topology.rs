//! The topology read from sysfs trees shaped like the machines we place shards on — one
//! node, two sockets, two sockets in sub-NUMA clustering (SNC-4: eight nodes), two
//! sockets plus a CPU-less CXL memory node — and the shard placement each gives
//! (the policy documented in ARCHITECTURE.md and README.md).

use std::path::Path;

use sagitta_engine::machine::{place, Placement};
use sagitta_engine::topology::{NodeKind, Source, Topology};

/// One node of a fixture: its cpulist, MemTotal in MiB and distance row.
struct Node<'a> {
    cpus: &'a str,
    mib: u64,
    distances: &'a [u32],
}

/// Writes a sysfs tree of `nodes` under `root` (as Linux lays it out).
fn write_tree(root: &Path, nodes: &[Node<'_>]) {
    let cpu = root.join("devices/system/cpu");
    std::fs::create_dir_all(&cpu).unwrap();
    let online: Vec<&str> = nodes
        .iter()
        .map(|node| node.cpus)
        .filter(|cpus| !cpus.is_empty())
        .collect();
    std::fs::write(cpu.join("online"), format!("{}\n", online.join(","))).unwrap();
    for (id, node) in nodes.iter().enumerate() {
        let dir = root.join(format!("devices/system/node/node{id}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cpulist"), format!("{}\n", node.cpus)).unwrap();
        let kb = node.mib * 1024;
        let meminfo = format!(
            "Node {id} MemTotal:       {kb} kB\nNode {id} MemFree:        {} kB\n",
            kb / 2
        );
        std::fs::write(dir.join("meminfo"), meminfo).unwrap();
        let row: Vec<String> = node.distances.iter().map(u32::to_string).collect();
        std::fs::write(dir.join("distance"), format!("{}\n", row.join(" "))).unwrap();
    }
}

fn fixture(nodes: &[Node<'_>]) -> (tempfile::TempDir, Topology) {
    let dir = tempfile::tempdir().unwrap();
    write_tree(dir.path(), nodes);
    let topology = Topology::read(dir.path(), None).unwrap();
    (dir, topology)
}

fn spread(topology: &Topology, shards: usize) -> Vec<usize> {
    place(topology, Placement::Spread, shards).nodes
}

const ONE: &[u32] = &[10];
const TWO_0: &[u32] = &[10, 21];
const TWO_1: &[u32] = &[21, 10];

#[test]
fn one_node_holds_every_shard() {
    let (_dir, topology) = fixture(&[Node {
        cpus: "0-1",
        mib: 24 * 1024,
        distances: ONE,
    }]);
    assert_eq!(topology.source, Source::Sysfs);
    assert_eq!(topology.nodes.len(), 1);
    assert_eq!(topology.nodes[0].cpus, vec![0, 1]);
    assert_eq!(topology.nodes[0].memory_bytes, 24 << 30);
    assert_eq!(spread(&topology, 3), vec![0, 0, 0]);
    let asked = place(&topology, Placement::Node(1), 2);
    assert_eq!(asked.nodes, vec![0, 0]);
    assert!(asked.note.unwrap().contains("node 1"));
}

#[test]
fn two_sockets_alternate_shards() {
    let (_dir, topology) = fixture(&[
        Node {
            cpus: "0-7,16-23",
            mib: 65536,
            distances: TWO_0,
        },
        Node {
            cpus: "8-15,24-31",
            mib: 65536,
            distances: TWO_1,
        },
    ]);
    assert_eq!(topology.compute_nodes().count(), 2);
    assert_eq!(topology.cpu_count(), 32);
    assert_eq!(topology.nodes[1].cpus[..3], [8, 9, 10]);
    assert_eq!(topology.nodes[0].distances, vec![10, 21]);
    assert_eq!(spread(&topology, 4), vec![0, 1, 0, 1]);
    assert_eq!(spread(&topology, 1), vec![0]);
    let pinned = place(&topology, Placement::Node(1), 3);
    assert_eq!((pinned.nodes, pinned.note), (vec![1, 1, 1], None));
    // a cpuset that leaves socket 1 out: its node is excluded and holds no shard
    let dir = tempfile::tempdir().unwrap();
    write_tree(
        dir.path(),
        &[
            Node {
                cpus: "0-7",
                mib: 1024,
                distances: TWO_0,
            },
            Node {
                cpus: "8-15",
                mib: 1024,
                distances: TWO_1,
            },
        ],
    );
    let narrowed = Topology::read(dir.path(), Some(&[2, 3])).unwrap();
    assert_eq!(narrowed.nodes[0].cpus, vec![2, 3]);
    assert_eq!(narrowed.nodes[1].kind(), NodeKind::Excluded);
    assert_eq!(spread(&narrowed, 3), vec![0, 0, 0]);
}

#[test]
fn two_sockets_in_snc4_spread_over_eight_nodes() {
    // four sub-NUMA clusters per socket: 12 within a socket, 21 across
    let rows: Vec<Vec<u32>> = (0..8)
        .map(|node: u32| {
            (0..8)
                .map(|other: u32| match (node == other, node / 4 == other / 4) {
                    (true, _) => 10,
                    (false, true) => 12,
                    (false, false) => 21,
                })
                .collect()
        })
        .collect();
    let cpus: Vec<String> = (0..8)
        .map(|node| format!("{}-{}", node * 6, node * 6 + 5))
        .collect();
    let nodes: Vec<Node<'_>> = (0..8)
        .map(|node| Node {
            cpus: &cpus[node],
            mib: 32768,
            distances: &rows[node],
        })
        .collect();
    let (_dir, topology) = fixture(&nodes);
    assert_eq!(topology.compute_nodes().count(), 8);
    assert_eq!(topology.cpu_count(), 48);
    assert_eq!(topology.nodes[5].cpus, (30..36).collect::<Vec<_>>());
    assert_eq!(
        topology.nodes[2].distances,
        vec![12, 12, 10, 12, 21, 21, 21, 21]
    );
    assert_eq!(spread(&topology, 8), (0..8).collect::<Vec<_>>());
    assert_eq!(spread(&topology, 10), vec![0, 1, 2, 3, 4, 5, 6, 7, 0, 1]);
    assert_eq!(place(&topology, Placement::Node(6), 2).nodes, vec![6, 6]);
    // no memory-only node: no far tier
    assert_eq!(
        place(&topology, Placement::Spread, 3).far_nodes,
        vec![None; 3]
    );
}

#[test]
fn a_cxl_memory_node_is_a_far_tier_and_holds_no_shard() {
    let (_dir, topology) = fixture(&[
        Node {
            cpus: "0-15",
            mib: 131072,
            distances: &[10, 21, 14],
        },
        Node {
            cpus: "16-31",
            mib: 131072,
            distances: &[21, 10, 24],
        },
        Node {
            cpus: "",
            mib: 262144,
            distances: &[14, 24, 10],
        },
    ]);
    assert_eq!(topology.nodes[2].kind(), NodeKind::Memory);
    assert!(topology.nodes[2].cpus.is_empty());
    assert_eq!(topology.nodes[2].memory_bytes, 256 << 30);
    let far: Vec<usize> = topology.memory_nodes().map(|node| node.id).collect();
    assert_eq!(far, vec![2]);
    assert_eq!(spread(&topology, 4), vec![0, 1, 0, 1]);
    // asking for the memory node places the shards on compute nodes, and says why
    let asked = place(&topology, Placement::Node(2), 2);
    assert_eq!(asked.nodes, vec![0, 1]);
    assert!(asked.note.unwrap().contains("node 2"));
    let json = topology.to_json();
    assert_eq!(json["nodes"][2]["kind"], "memory-only");
    assert_eq!(json["nodes"][1]["cpus"], "16-31");
    assert_eq!(json["memory_only_nodes"], 1);
    // the CXL node is every shard's far tier
    assert_eq!(
        place(&topology, Placement::Spread, 3).far_nodes,
        vec![Some(2); 3]
    );
}

#[test]
fn each_socket_takes_its_nearest_cxl_node_as_far_tier() {
    let (_dir, topology) = fixture(&[
        Node {
            cpus: "0-15",
            mib: 131072,
            distances: &[10, 21, 24, 14],
        },
        Node {
            cpus: "16-31",
            mib: 131072,
            distances: &[21, 10, 14, 24],
        },
        Node {
            cpus: "",
            mib: 262144,
            distances: &[24, 14, 10, 26],
        },
        Node {
            cpus: "",
            mib: 262144,
            distances: &[14, 24, 26, 10],
        },
    ]);
    let placed = place(&topology, Placement::Spread, 4);
    assert_eq!(placed.nodes, vec![0, 1, 0, 1]);
    assert_eq!(placed.far_nodes, vec![Some(3), Some(2), Some(3), Some(2)]);
    let pinned = place(&topology, Placement::Node(1), 2);
    assert_eq!(pinned.far_nodes, vec![Some(2), Some(2)]);
    let json = pinned.to_json(Placement::Node(1));
    assert_eq!(json["shards"][1]["far_node"], 2);
}

#[test]
fn a_kernel_without_numa_is_one_node_of_the_online_cpus() {
    let dir = tempfile::tempdir().unwrap();
    let cpu = dir.path().join("devices/system/cpu");
    std::fs::create_dir_all(&cpu).unwrap();
    std::fs::write(cpu.join("online"), "0-3\n").unwrap();
    let topology = Topology::read(dir.path(), None).unwrap();
    assert_eq!(topology.nodes.len(), 1);
    assert_eq!(topology.nodes[0].cpus, vec![0, 1, 2, 3]);
}

#[test]
fn malformed_trees_are_errors_naming_the_file() {
    let cases: [(&str, &str, &str); 4] = [
        ("distance", "10 21 30\n", "3 distances for 2 nodes"),
        ("distance", "10 x\n", "\"x\""),
        ("cpulist", "7-2\n", "backwards"),
        ("meminfo", "Node 1 MemFree: 10 kB\n", "no MemTotal"),
    ];
    for (file, text, reason) in cases {
        let dir = tempfile::tempdir().unwrap();
        write_tree(
            dir.path(),
            &[
                Node {
                    cpus: "0",
                    mib: 1,
                    distances: TWO_0,
                },
                Node {
                    cpus: "1",
                    mib: 1,
                    distances: TWO_1,
                },
            ],
        );
        std::fs::write(
            dir.path().join("devices/system/node/node1").join(file),
            text,
        )
        .unwrap();
        let error = Topology::read(dir.path(), None).unwrap_err();
        assert_eq!(error.file, format!("devices/system/node/node1/{file}"));
        assert!(error.reason.contains(reason), "{file}: {}", error.reason);
    }
    let empty = tempfile::tempdir().unwrap();
    let error = Topology::read(empty.path(), None).unwrap_err();
    assert_eq!(error.file, "devices/system/cpu/online");
}

#[test]
fn this_machine_has_a_compute_node_with_every_allowed_cpu() {
    let topology = Topology::detect();
    assert!(topology.compute_nodes().count() >= 1);
    let allowed = sagitta_kernels::sched::allowed_cpus().unwrap();
    assert_eq!(topology.cpu_count(), allowed.len());
}

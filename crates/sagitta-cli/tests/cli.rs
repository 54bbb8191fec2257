//! The `sagitta` binary: exit status 0 with a one-line summary, 2 for a wrong command line,
//! 1 for bad data, with `error: <message>` on stderr.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Arc;

use sagitta_engine::database::Database;
use sagitta_engine::{Datatype, Health, PointId, SegmentKindName};
use sagitta_storage::fs::OsFileSystem;

fn sagitta(arguments: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sagitta"))
        .args(arguments)
        .output()
        .expect("the sagitta binary runs")
}

/// A `.fvecs` file with two 2-D rows (the second value `second`), in a fresh temp dir.
fn fvecs_file(name: &str, second: f32) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("sagitta-cli-bin-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut bytes = Vec::new();
    for row in [[1.0_f32, 2.0], [3.0, second]] {
        bytes.extend_from_slice(&2_i32.to_le_bytes());
        bytes.extend(row.iter().flat_map(|v| v.to_le_bytes()));
    }
    let path = dir.join("base.fvecs");
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

fn import_arguments<'a>(data: &'a str, source: &'a str) -> Vec<&'a str> {
    vec![
        "import",
        "--data",
        data,
        "--collection",
        "docs",
        "--distance",
        "Euclid",
        source,
    ]
}

#[test]
fn import_creates_the_collection_and_exits_zero() {
    let (dir, path) = fvecs_file("ok", 4.0);
    let data = dir.join("db");
    let arguments = import_arguments(data.to_str().unwrap(), path.to_str().unwrap());
    let output = sagitta(&arguments);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(stdout.contains("imported 2 points (dim 2"), "{stdout}");
    // the collection is there, fully indexed, with exactly the file's rows
    let database = Database::open(Arc::new(OsFileSystem), &data).unwrap();
    let docs = database.collection("docs").unwrap();
    assert_eq!(docs.status().health, Health::Green);
    let row = |id| docs.get(&PointId::Number(id)).unwrap().unwrap().vector;
    assert_eq!((row(0), row(1)), (vec![1.0, 2.0], vec![3.0, 4.0]));
    drop((docs, database));
    // importing the same name again is refused, and changes nothing
    let again = sagitta(&arguments);
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    assert!(String::from_utf8(again.stderr)
        .unwrap()
        .contains("already exists"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn import_builds_disk_segments_when_asked() {
    let (dir, path) = fvecs_file("disk", 4.0);
    let data = dir.join("db");
    let mut arguments = import_arguments(data.to_str().unwrap(), path.to_str().unwrap());
    arguments.extend(["--segment-kind", "disk", "--page-cache-mb", "8"]);
    arguments.extend(["--datatype", "float16", "--partition-size", "40"]);
    let output = sagitta(&arguments);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let database = Database::open(Arc::new(OsFileSystem), &data).unwrap();
    let docs = database.collection("docs").unwrap();
    let storage = docs.config().storage;
    assert_eq!(
        (
            storage.segment_kind,
            storage.page_cache_mb,
            storage.datatype,
            storage.partition_size
        ),
        (SegmentKindName::Disk, 8, Datatype::Float16, 40)
    );
    // the vectors come back from the records file (small integers: exact in f16)
    let row = |id| docs.get(&PointId::Number(id)).unwrap().unwrap().vector;
    assert_eq!((row(0), row(1)), (vec![1.0, 2.0], vec![3.0, 4.0]));
    assert!(data
        .join("collections/docs/shard-0/segment-0.records")
        .exists());
    drop((docs, database));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_data_exits_one_with_the_error_on_stderr() {
    let (dir, path) = fvecs_file("nan", f32::NAN);
    let data = dir.join("db");
    let output = sagitta(&import_arguments(
        data.to_str().unwrap(),
        path.to_str().unwrap(),
    ));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(
        stderr.contains("base.fvecs: row 1 (byte 12): value 1 is NaN"),
        "{stderr}"
    );
}

#[test]
fn usage_errors_exit_two() {
    let (dir, path) = fvecs_file("usage", 4.0);
    let data = dir.join("db");
    let (data, path) = (data.to_str().unwrap(), path.to_str().unwrap());
    let mut bad_name = import_arguments(data, path);
    bad_name[4] = "no/slashes";
    let mut bad_distance = import_arguments(data, path);
    bad_distance[6] = "Manhattan";
    let mut misfit_option = import_arguments(data, path);
    misfit_option.extend(["--id-column", "key"]);
    let mut bad_shards = import_arguments(data, path);
    bad_shards.extend(["--shards", "0"]);
    let mut bad_kind = import_arguments(data, path);
    bad_kind.extend(["--segment-kind", "lsm"]);
    let mut huge_cache = import_arguments(data, path);
    huge_cache.extend(["--page-cache-mb", "99999999"]);
    let mut bad_datatype = import_arguments(data, path);
    bad_datatype.extend(["--datatype", "uint8"]);
    let mut tiny_partitions = import_arguments(data, path);
    tiny_partitions.extend(["--partition-size", "1"]);
    let missing_source = vec!["import", "--data", data, "--collection", "docs"];
    for arguments in [
        bad_name,
        bad_distance,
        misfit_option,
        bad_shards,
        bad_kind,
        huge_cache,
        bad_datatype,
        tiny_partitions,
        missing_source,
    ] {
        let output = sagitta(&arguments);
        assert_eq!(output.status.code(), Some(2), "{arguments:?}: {output:?}");
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(stderr.starts_with("error: "), "{arguments:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `sagitta topology` of a two-socket sysfs tree: text and JSON name both nodes and place
/// shards alternately; a tree that cannot be read and a bad policy are errors naming them.
#[test]
fn topology_reports_a_sysfs_tree_and_refuses_bad_input() {
    let root = std::env::temp_dir().join(format!("sagitta-cli-topology-{}", std::process::id()));
    for (node, cpus, distances) in [(0, "0-3", "10 21"), (1, "4-7", "21 10")] {
        let dir = root.join(format!("devices/system/node/node{node}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cpulist"), format!("{cpus}\n")).unwrap();
        std::fs::write(
            dir.join("meminfo"),
            format!("Node {node} MemTotal: 2097152 kB\n"),
        )
        .unwrap();
        std::fs::write(dir.join("distance"), format!("{distances}\n")).unwrap();
    }
    let tree = root.to_str().unwrap();
    let text = sagitta(&["topology", "--sysfs", tree, "--shards", "3"]);
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(
        text.contains("node 1: compute, cpus [4-7], 2048 MiB, distances 21 10"),
        "{text}"
    );
    assert!(
        text.contains("shard 0 → node 0, shard 1 → node 1, shard 2 → node 0"),
        "{text}"
    );
    let json = sagitta(&[
        "topology",
        "--sysfs",
        tree,
        "--json",
        "--placement",
        "node:1",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["compute_nodes"], 2);
    assert_eq!(report["placement"]["policy"], "node:1");
    assert_eq!(report["placement"]["shards"][3]["node"], 1);
    let bad_policy = sagitta(&["topology", "--placement", "node:one"]);
    assert_eq!(bad_policy.status.code(), Some(2));
    let stderr = String::from_utf8(bad_policy.stderr).unwrap();
    assert!(stderr.contains("--placement \"node:one\""), "{stderr}");
    std::fs::write(root.join("devices/system/node/node1/distance"), "10\n").unwrap();
    let broken = sagitta(&["topology", "--sysfs", tree]);
    assert_eq!(broken.status.code(), Some(1));
    let stderr = String::from_utf8(broken.stderr).unwrap();
    assert!(
        stderr.contains("node1/distance: 1 distances for 2 nodes"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

//! The optimizer reports its work through the `log` facade at info level: a seal, a merge
//! and a vacuum each give one record naming the collection, the shard, what was done and
//! how many points, with the time it took.

use std::path::Path;
use std::sync::Mutex;

use log::{Level, Log, Metadata, Record};
use sagitta_engine::{Collection, CollectionConfig, Distance, Point, PointId, StorageConfig};
use sagitta_storage::sim::SimFileSystem;

/// Keeps every record of the optimizer's target.
struct Recorder(Mutex<Vec<(Level, String)>>);

impl Log for Recorder {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target() == "sagitta::optimizer"
    }

    fn log(&self, record: &Record<'_>) {
        if self.enabled(record.metadata()) {
            let line = record.args().to_string();
            self.0.lock().unwrap().push((record.level(), line));
        }
    }

    fn flush(&self) {}
}

static RECORDER: Recorder = Recorder(Mutex::new(Vec::new()));

fn points(ids: std::ops::Range<u64>) -> Vec<Point> {
    ids.map(|id| Point {
        id: PointId::Number(id),
        vector: vec![id as f32, 1.0, 0.5, -1.0],
        payload: None,
        side: Vec::new(),
    })
    .collect()
}

#[test]
fn seals_merges_and_vacuums_are_logged_at_info_level() {
    log::set_logger(&RECORDER).unwrap();
    log::set_max_level(log::LevelFilter::Info);
    let fs = SimFileSystem::new();
    let config = CollectionConfig {
        dim: 4,
        distance: Distance::Euclid,
        shard_count: 1,
        storage: StorageConfig::default(),
    };
    let collection = Collection::create(&fs, Path::new("/db/logged"), config).unwrap();
    let mut policy = collection.policy();
    policy.seal_points = 50;
    policy.seal_idle = std::time::Duration::ZERO;
    policy.max_segments = 1;
    policy.vacuum_min_deleted = 10;
    collection.set_policy(policy);
    collection.upsert(points(0..60), true).unwrap();
    assert!(collection.maintain(&fs).unwrap());
    collection.upsert(points(60..120), true).unwrap();
    while collection.maintain(&fs).unwrap() {}
    let deleted: Vec<PointId> = (0..40).map(PointId::Number).collect();
    collection.delete(&deleted, true).unwrap();
    while collection.maintain(&fs).unwrap() {}
    let records = RECORDER.0.lock().unwrap().clone();
    let find = |what: &str| {
        records
            .iter()
            .find(|(_, line)| line.contains(what))
            .unwrap_or_else(|| panic!("no record of `{what}` in {records:?}"))
    };
    let (level, seal) = find("sealed the write buffer");
    assert_eq!(*level, Level::Info);
    assert!(
        seal.starts_with("collection `logged` shard 0: ") && seal.contains(": 60 points in "),
        "{seal}"
    );
    let (_, merge) = find("merged segments");
    assert!(
        merge.contains(" points in ") && merge.ends_with(" s"),
        "{merge}"
    );
    let (_, vacuum) = find("vacuumed segment");
    assert!(vacuum.contains(": 80 points in "), "{vacuum}");
}

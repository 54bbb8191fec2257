//! Seeded crash simulation of a collection against a model of every field of every point.
//!
//! Every write kind (upsert — in the HNSW runs also of points without their vector —,
//! delete by id, delete by filter, set / overwrite / delete-keys / clear payload, payload
//! index creation) is applied to points in every state: in the write
//! buffer, in a buffer that joined a segment's graph, in a frozen buffer whose seal is
//! halfway through writing its segment, in sealed segments, and in segments a merge is
//! halfway through rebuilding. The halfway states come from the simulated disk's pause
//! point: the seal or merge runs on a second thread and is held when it opens its segment
//! file, the test writes, then lets it finish (or fail, and the power goes out).
//!
//! After a crash each shard must hold exactly a prefix of its writes that includes every
//! synced one; after a clean reopen, all of them. "Hold" means ids, vectors (dense and, in
//! the named-vector runs, sparse and multi) and payloads.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{differences, engine_state, group_filter, replay, Operation, State, Write};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sagitta_engine::{
    Collection, CollectionConfig, Distance, MultiSpace, MultiVector, OptimizerPolicy, PointId,
    SegmentKindName, SideSpace, SideVector, SparseSpace, SparseVector, StorageConfig, VectorSpace,
    VectorSpaces,
};
use sagitta_storage::sim::SimFileSystem;

const DIM: usize = 4;
const IDS: u64 = 24;
/// The row width of the named-vector runs' multivector.
const MULTI_DIM: usize = 3;

/// The model: per shard, the ordered writes and how many of them are synced.
#[derive(Clone, Default)]
struct ShardModel {
    writes: Vec<Write>,
    synced: usize,
}

fn tiny_policy() -> OptimizerPolicy {
    OptimizerPolicy {
        seal_points: 6,
        seal_idle: Duration::ZERO,
        vacuum_min_deleted: 2,
        vacuum_fraction: 0.3,
        max_segments: 2,
        retry_after_error: Duration::ZERO,
        index_min_rows: 4,
    }
}

struct Simulation {
    rng: ChaCha8Rng,
    seed: u64,
    fs: SimFileSystem,
    shard_count: usize,
    shards: Vec<ShardModel>,
    indexes: BTreeSet<String>,
    version: u64,
    /// Operations applied while a seal or merge was held halfway (coverage report).
    halfway_writes: usize,
    trace: bool,
    /// The file a seal or merge is held at: the first one its segment kind writes.
    build_file: &'static str,
    /// Named vectors (two of [`DIM`]/2 values): upserts leave one of them out at random.
    named: bool,
    /// One unnamed vector in HNSW segments: upserts leave it out at random.
    absent_vectors: bool,
}

const DIRECTORY: &str = "/db/c";

impl Simulation {
    fn shard_of(&self, id: u64) -> usize {
        (PointId::Number(id).routing_hash() % self.shard_count as u64) as usize
    }

    fn current(&self) -> State {
        let mut state = State::new();
        for shard in &self.shards {
            state.extend(replay(&shard.writes));
        }
        state
    }

    /// Splits `write` by shard and records each part, as the engine logs it.
    fn record(&mut self, write: &Write, wait: bool) {
        for shard in 0..self.shard_count {
            let ids: Vec<u64> = write
                .ids()
                .into_iter()
                .filter(|id| self.shard_of(*id) == shard)
                .collect();
            if ids.is_empty() {
                continue;
            }
            let model = &mut self.shards[shard];
            model.writes.push(write.restricted(ids));
            if wait {
                model.synced = model.writes.len();
            }
        }
    }

    /// One random write through the engine, recorded in the model.
    fn random_write(&mut self, collection: &Collection) {
        let wait = self.rng.gen_bool(0.5);
        let mut operation = Operation::random(&mut self.rng, &mut self.version, IDS, DIM);
        if let (true, Operation::Upsert(points)) = (self.absent_vectors, &mut operation) {
            // a point without its one unnamed vector (NaNs: found by no search)
            for (_, stored) in points.iter_mut() {
                if self.rng.gen_range(0..5) == 0 {
                    stored.vector.fill(f32::NAN);
                }
            }
        }
        if let (true, Operation::Upsert(points)) = (self.named, &mut operation) {
            for (_, stored) in points.iter_mut() {
                // a point without its first or its second named vector (NaNs there)
                match self.rng.gen_range(0..4) {
                    0 => stored.vector[..DIM / 2].fill(f32::NAN),
                    1 => stored.vector[DIM / 2..].fill(f32::NAN),
                    _ => {}
                }
                // a sparse vector and a multivector (1 to 4 rows), each or none (a
                // point may have no vector at all)
                let sparse = self.rng.gen_bool(0.7).then(|| {
                    let indices: BTreeSet<u32> = (0..self.rng.gen_range(0..5))
                        .map(|_| self.rng.gen_range(0..50))
                        .collect();
                    let values = indices
                        .iter()
                        .map(|_| self.rng.gen_range(-2.0..2.0))
                        .collect();
                    SparseVector::new(indices.into_iter().collect(), values).unwrap()
                });
                let multi = self.rng.gen_bool(0.6).then(|| {
                    let rows: Vec<Vec<f32>> = (0..self.rng.gen_range(1..5))
                        .map(|_| {
                            (0..MULTI_DIM)
                                .map(|_| self.rng.gen_range(-1.0..1.0))
                                .collect()
                        })
                        .collect();
                    MultiVector::new(&rows).unwrap()
                });
                stored.side = vec![sparse.map(SideVector::Sparse), multi.map(SideVector::Multi)];
            }
        }
        let state = self.current();
        if let Operation::DeleteByGroup(group) = operation {
            // the filter finds what the model finds, wherever the points are
            let mut matched: Vec<u64> = collection
                .matching_ids(&group_filter(group))
                .unwrap()
                .iter()
                .map(|id| match id {
                    PointId::Number(number) => *number,
                    PointId::Uuid(_) => panic!("a uuid appeared"),
                })
                .collect();
            matched.sort_unstable();
            let expected = common::group_members(&state, group);
            assert_eq!(matched, expected, "seed {}: filter g={group}", self.seed);
        }
        operation.perform(collection, &self.fs, wait);
        if self.trace {
            eprintln!("write wait={wait} {operation:?}");
        }
        match operation.resolve(&state) {
            Some(write) => self.record(&write, wait),
            None => {
                if let Operation::CreateIndex(field, _) = operation {
                    self.indexes.insert(field.to_string());
                }
            }
        }
    }

    fn engine_state(&self, collection: &Collection) -> State {
        engine_state(collection, &format!("seed {}", self.seed))
    }

    fn check_indexes(&self, collection: &Collection) {
        let schema: BTreeSet<String> = collection.payload_schema().keys().cloned().collect();
        assert_eq!(schema, self.indexes, "seed {}: payload indexes", self.seed);
    }

    /// The engine holds every write of the model, crash or not.
    fn check_everything(&self, collection: &Collection, moment: &str) {
        let expected = self.current();
        let got = self.engine_state(collection);
        assert!(
            got == expected,
            "seed {}: {moment}: the engine differs from the model:\n{}",
            self.seed,
            differences(&expected, &got)
        );
        self.check_indexes(collection);
        self.check_status_counts(collection, moment);
    }

    /// Collection info counts points exactly (they may only be approximate while the
    /// collection is yellow, but never above the points written).
    fn check_status_counts(&self, collection: &Collection, moment: &str) {
        if let Err(violation) = collection.check_invariants() {
            panic!("seed {}: {moment}: {violation}", self.seed);
        }
        let status = collection.status();
        let exact = collection.count(None).unwrap();
        assert!(
            status.points == exact,
            "seed {}: {moment}: status counts {} points ({} indexed), exactly {exact} live ({:?})",
            self.seed,
            status.points,
            status.indexed,
            status.health
        );
        assert!(status.indexed <= status.points, "seed {}", self.seed);
    }

    /// After power loss: each shard holds a prefix of its writes, at least the synced ones.
    fn check_after_crash(&mut self, collection: &Collection) {
        let recovered = self.engine_state(collection);
        for shard in 0..self.shard_count {
            let mine: State = recovered
                .iter()
                .filter(|(id, _)| self.shard_of(**id) == shard)
                .map(|(id, stored)| (*id, stored.clone()))
                .collect();
            let model = &mut self.shards[shard];
            let prefix = (model.synced..=model.writes.len())
                .find(|length| replay(&model.writes[..*length]) == mine)
                .unwrap_or_else(|| {
                    for length in model.synced..=model.writes.len() {
                        let state = replay(&model.writes[..length]);
                        eprintln!("prefix {length}:\n{}", differences(&state, &mine));
                    }
                    panic!(
                        "seed {}: shard {shard} holds no prefix of its writes \
                         (synced {}, written {}):\nrecovered {mine:?}\nall synced {:?}",
                        self.seed,
                        model.synced,
                        model.writes.len(),
                        replay(&model.writes[..model.synced]),
                    )
                });
            model.writes.truncate(prefix);
            model.synced = prefix;
        }
        self.check_indexes(collection);
        self.check_status_counts(collection, "after a crash");
    }

    fn mark_all_synced(&mut self, counts: &[usize]) {
        for (model, count) in self.shards.iter_mut().zip(counts) {
            model.synced = model.synced.max(*count);
        }
    }

    /// A seal (all shards) or one optimizer unit run on a second thread, held when it opens
    /// its first segment file; meanwhile this thread writes. Returns false when the power
    /// must go out (the held build was failed, or the maintenance failed).
    fn maintenance_with_writes_halfway(&mut self, collection: &Collection) -> bool {
        let seal_all = self.rng.gen_bool(0.5);
        let fail_halfway = self.rng.gen_bool(0.15);
        let writes_halfway = self.rng.gen_range(1..6);
        let written_before: Vec<usize> = self.shards.iter().map(|s| s.writes.len()).collect();
        self.fs.pause_at_file(self.build_file);
        let (result, halfway) = std::thread::scope(|scope| {
            let fs = self.fs.clone(); // the same disk
            let worker = scope.spawn(move || {
                if seal_all {
                    collection.optimize(&fs).map(|sealed| sealed > 0)
                } else {
                    collection.maintain(&fs)
                }
            });
            let halfway = self.fs.wait_until_paused(|| worker.is_finished());
            if self.trace {
                eprintln!("maintenance seal_all={seal_all} halfway={halfway} fail={fail_halfway}");
            }
            if halfway {
                for _ in 0..writes_halfway {
                    self.random_write(collection);
                    self.halfway_writes += 1;
                }
                if self.rng.gen_bool(0.3) {
                    collection.index_buffers(self.rng.gen_range(1..8));
                }
                self.fs.release(fail_halfway);
            }
            (worker.join().expect("maintenance does not panic"), halfway)
        });
        match result {
            Ok(_) => {
                if seal_all {
                    // a finished seal made every write acknowledged before it durable
                    self.mark_all_synced(&written_before);
                }
                true
            }
            Err(error) => {
                assert!(
                    halfway && fail_halfway,
                    "seed {}: maintenance failed without a fault: {error}",
                    self.seed
                );
                false
            }
        }
    }

    /// Maintenance with an injected I/O error at a random write, on this thread.
    fn maintenance_with_fault(&mut self, collection: &Collection) -> bool {
        let seal_all = self.rng.gen_bool(0.4);
        let failing = self.rng.gen_bool(0.4);
        if failing {
            self.fs.fail_write_after(self.rng.gen_range(1..8));
        }
        let written_before: Vec<usize> = self.shards.iter().map(|s| s.writes.len()).collect();
        if self.trace {
            eprintln!("maintenance with fault seal_all={seal_all} failing={failing}");
        }
        let result = if seal_all {
            collection.optimize(&self.fs).map(|_| ())
        } else {
            (0..self.rng.gen_range(1..4))
                .try_for_each(|_| collection.maintain(&self.fs).map(|_| ()))
        };
        match result {
            Ok(()) => {
                if failing {
                    self.fs.fail_write_after(u64::MAX); // the fault did not fire: disarm it
                }
                if seal_all {
                    self.mark_all_synced(&written_before);
                }
                true
            }
            Err(_) => {
                assert!(
                    failing,
                    "seed {}: maintenance failed without a fault",
                    self.seed
                );
                false
            }
        }
    }
}

/// Runs one seeded simulation; returns (operations, writes made while a build was held).
fn simulate(seed: u64, steps: usize, kind: SegmentKindName) -> (usize, usize) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let shard_count = rng.gen_range(1..=2);
    let fs = SimFileSystem::new();
    let directory = Path::new(DIRECTORY);
    let config = CollectionConfig {
        dim: DIM,
        distance: Distance::Euclid,
        shard_count,
        storage: StorageConfig {
            segment_kind: kind,
            // tiny partitions, so a few dozen points split them (past 2 × the size) and
            // deletes dissolve them (below a quarter of it)
            partition_size: [2, 3, 8][rng.gen_range(0..3)],
            // half the HNSW runs keep their sealed vectors in records files
            vectors_on_disk: kind == SegmentKindName::Hnsw && rng.gen_bool(0.5),
            ..StorageConfig::default()
        },
    };
    // disk runs spread their records over 0 to 2 more directories (other devices)
    let stripes: Vec<PathBuf> = match kind {
        SegmentKindName::Disk => (0..rng.gen_range(0..=2))
            .map(|stripe| PathBuf::from(format!("/stripe-{stripe}/c")))
            .collect(),
        SegmentKindName::Hnsw | SegmentKindName::Spaces => Vec::new(),
    };
    let named = kind == SegmentKindName::Spaces;
    let spaces = if named {
        let space = |name: &str| VectorSpace {
            name: name.to_string(),
            dim: DIM / 2,
            distance: Distance::Euclid,
        };
        let sparse = SideSpace::Sparse(SparseSpace {
            name: "s".to_string(),
            idf: true,
        });
        let multi = SideSpace::Multi(MultiSpace {
            name: "m".to_string(),
            dim: MULTI_DIM,
            distance: Distance::Dot,
        });
        VectorSpaces::with_side(vec![space("a"), space("b")], vec![sparse, multi], DIM).unwrap()
    } else {
        VectorSpaces::default()
    };
    let mut collection =
        Collection::create_with_spaces(&fs, directory, config, spaces, &stripes).unwrap();
    collection.set_policy(tiny_policy());
    let mut simulation = Simulation {
        rng,
        seed,
        fs,
        shard_count,
        shards: vec![ShardModel::default(); shard_count],
        indexes: BTreeSet::new(),
        version: 0,
        halfway_writes: 0,
        trace: std::env::var("SAGITTA_CRASH_TRACE").is_ok(),
        build_file: match kind {
            SegmentKindName::Hnsw => ".hnsw",
            SegmentKindName::Disk => ".records",
            SegmentKindName::Spaces => ".spaces",
        },
        named,
        absent_vectors: kind == SegmentKindName::Hnsw,
    };
    let mut operations = 0;
    for _ in 0..steps {
        simulation.random_write(&collection);
        operations += 1;
        let event = simulation.rng.gen_range(0..100);
        let keep_power = if event < 18 {
            simulation.maintenance_with_writes_halfway(&collection)
        } else if event < 28 {
            simulation.maintenance_with_fault(&collection)
        } else if event < 40 {
            // the indexer grows the buffers' graphs, joining a segment's when it has room
            collection.index_buffers(simulation.rng.gen_range(1..8));
            true
        } else if event < 46 {
            // a clean shutdown and restart (SIGTERM): nothing may be missing
            simulation.check_everything(&collection, "before a clean restart");
            drop(collection);
            collection = Collection::open_striped(&simulation.fs, directory, &stripes).unwrap();
            collection.set_policy(tiny_policy());
            simulation.check_everything(&collection, "after a clean restart");
            true
        } else {
            !simulation.rng.gen_bool(0.08)
        };
        if simulation.trace {
            eprintln!("event {event} keep_power={keep_power}");
        }
        if keep_power {
            simulation.check_everything(&collection, "while running");
        } else {
            drop(collection);
            simulation.fs.crash(&mut simulation.rng);
            collection = Collection::open_striped(&simulation.fs, directory, &stripes).unwrap();
            collection.set_policy(tiny_policy());
            simulation.check_after_crash(&collection);
        }
    }
    (operations, simulation.halfway_writes)
}

/// The number of seeds: `SAGITTA_CRASH_SEEDS` (CI keeps the default).
fn seed_count() -> u64 {
    std::env::var("SAGITTA_CRASH_SEEDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(300)
}

/// Runs `seeds` simulations of `kind` from `SAGITTA_CRASH_FIRST_SEED` (default 0).
fn run_seeds(seeds: u64, kind: SegmentKindName) {
    let (mut operations, mut halfway) = (0, 0);
    let first = std::env::var("SAGITTA_CRASH_FIRST_SEED")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(0);
    for seed in first..first + seeds {
        let (done, during_builds) = simulate(seed, 60, kind);
        operations += done;
        halfway += during_builds;
    }
    eprintln!(
        "{kind:?}: {seeds} seeds, {operations} operations, {halfway} of them while a seal or \
         merge was halfway through its build"
    );
    assert!(
        halfway > seeds as usize,
        "the simulation reaches the halfway states"
    );
}

#[test]
fn every_write_kind_in_every_point_state_survives_crashes_and_restarts() {
    run_seeds(seed_count(), SegmentKindName::Hnsw);
}

/// The same with disk segments: seals, merges and vacuums build partitions and records
/// files, and copy on write reads sealed vectors back from disk pages.
#[test]
fn disk_segments_survive_crashes_and_restarts_in_every_point_state() {
    run_seeds(seed_count() / 2, SegmentKindName::Disk);
}

/// The same with named vectors: points with both, or only one, of two vectors, sealed
/// into and merged between segments with one graph per vector.
#[test]
fn named_vectors_survive_crashes_and_restarts_in_every_point_state() {
    run_seeds(seed_count() / 2, SegmentKindName::Spaces);
}

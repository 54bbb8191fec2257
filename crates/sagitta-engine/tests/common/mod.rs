//! The model shared by the crash tests: every field of every point, and every write kind
//! the engine has, generated at random, performed on a collection and applied to the model.

#![allow(dead_code)] // each test binary uses its own part

use std::collections::BTreeMap;

use rand::Rng;
use sagitta_engine::{Collection, FieldType, Filter, Point, PointId, SideVector};
use sagitta_storage::fs::FileSystem;
use serde_json::{json, Map, Value};

#[derive(Clone, Debug)]
pub struct Stored {
    pub vector: Vec<f32>,
    pub payload: Option<Map<String, Value>>,
    /// One entry per side vector (sparse or multi) of the collection (none without them).
    pub side: Vec<Option<SideVector>>,
}

/// Vectors compare bit for bit: a named vector a point lacks is stored as NaNs, which
/// must come back as NaNs (and `NaN != NaN` would hide nothing else).
impl PartialEq for Stored {
    fn eq(&self, other: &Stored) -> bool {
        same_bits(&self.vector, &other.vector)
            && self.payload == other.payload
            && self.side == other.side
    }
}

pub fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

pub type State = BTreeMap<u64, Stored>;

/// One write as the engine performs it: what a caller asks for.
#[derive(Clone, Debug)]
pub enum Operation {
    Upsert(Vec<(u64, Stored)>),
    Delete(Vec<u64>),
    /// Delete every point whose payload has `g` equal to this group.
    DeleteByGroup(i64),
    Set(Vec<u64>, Map<String, Value>),
    /// An empty object clears the payload (Qdrant's "clear payload").
    Overwrite(Vec<u64>, Map<String, Value>),
    DeleteKeys(Vec<u64>, Vec<String>),
    CreateIndex(&'static str, FieldType),
}

/// One shard's part of an operation, as its log holds it (filters resolved to ids).
#[derive(Clone, Debug)]
pub enum Write {
    Upsert(Vec<(u64, Stored)>),
    Delete(Vec<u64>),
    Set(Vec<u64>, Map<String, Value>),
    Overwrite(Vec<u64>, Map<String, Value>),
    DeleteKeys(Vec<u64>, Vec<String>),
}

pub fn vector_for(id: u64, version: u64, dim: usize) -> Vec<f32> {
    (0..dim)
        .map(|j| ((id * 31 + version * 7 + j as u64 * 13) % 97) as f32 / 97.0 - 0.5)
        .collect()
}

pub fn random_payload(rng: &mut impl Rng, version: u64) -> Map<String, Value> {
    let mut object = Map::new();
    object.insert("v".into(), json!(version));
    if rng.gen_bool(0.8) {
        object.insert("g".into(), json!(rng.gen_range(0..4)));
    }
    if rng.gen_bool(0.5) {
        let tag = ["red", "green", "blue"][rng.gen_range(0..3)];
        object.insert("tag".into(), json!(tag));
    }
    if rng.gen_bool(0.3) {
        object.insert(
            "nested".into(),
            json!({"x": rng.gen_range(0..10), "list": [version, null, []]}),
        );
    }
    object
}

impl Operation {
    /// A random operation over ids `0..ids`; `version` numbers vectors and payloads.
    pub fn random(rng: &mut impl Rng, version: &mut u64, ids: u64, dim: usize) -> Operation {
        let random_ids = |rng: &mut dyn rand::RngCore, most: usize| -> Vec<u64> {
            let count = rng.gen_range(1..=most);
            (0..count).map(|_| rng.gen_range(0..ids)).collect()
        };
        let kind = rng.gen_range(0..100);
        *version += 1;
        if kind < 40 {
            let points = random_ids(rng, 6)
                .into_iter()
                .map(|id| {
                    *version += 1;
                    let payload = rng.gen_bool(0.9).then(|| random_payload(rng, *version));
                    let vector = vector_for(id, *version, dim);
                    let side = Vec::new();
                    (
                        id,
                        Stored {
                            vector,
                            payload,
                            side,
                        },
                    )
                })
                .collect();
            Operation::Upsert(points)
        } else if kind < 52 {
            Operation::Delete(random_ids(rng, 3))
        } else if kind < 60 {
            Operation::DeleteByGroup(rng.gen_range(0..4))
        } else if kind < 75 {
            Operation::Set(random_ids(rng, 4), random_payload(rng, *version))
        } else if kind < 85 {
            let update = if rng.gen_bool(0.3) {
                Map::new()
            } else {
                random_payload(rng, *version)
            };
            Operation::Overwrite(random_ids(rng, 4), update)
        } else if kind < 95 {
            let keys = ["g", "tag", "nested", "absent"]
                .iter()
                .filter(|_| rng.gen_bool(0.5))
                .map(ToString::to_string)
                .collect();
            Operation::DeleteKeys(random_ids(rng, 4), keys)
        } else if rng.gen_bool(0.5) {
            Operation::CreateIndex("g", FieldType::Integer)
        } else {
            Operation::CreateIndex("tag", FieldType::Keyword)
        }
    }

    /// What the model logs for it, given the state it meets (`None`: no point changes).
    pub fn resolve(&self, state: &State) -> Option<Write> {
        Some(match self {
            Operation::Upsert(points) => Write::Upsert(points.clone()),
            Operation::Delete(ids) => Write::Delete(ids.clone()),
            Operation::DeleteByGroup(group) => Write::Delete(group_members(state, *group)),
            Operation::Set(ids, update) => Write::Set(ids.clone(), update.clone()),
            Operation::Overwrite(ids, update) => Write::Overwrite(ids.clone(), update.clone()),
            Operation::DeleteKeys(ids, keys) => Write::DeleteKeys(ids.clone(), keys.clone()),
            Operation::CreateIndex(..) => return None,
        })
    }

    /// Performs it on `collection`.
    pub fn perform(&self, collection: &Collection, fs: &dyn FileSystem, wait: bool) {
        let text = |object: &Map<String, Value>| Value::Object(object.clone()).to_string();
        match self {
            Operation::Upsert(points) => {
                let points = points
                    .iter()
                    .map(|(id, stored)| Point {
                        id: PointId::Number(*id),
                        vector: stored.vector.clone(),
                        payload: stored.payload.as_ref().map(text),
                        side: stored.side.clone(),
                    })
                    .collect();
                collection.upsert(points, wait).unwrap();
            }
            Operation::Delete(ids) => collection.delete(&numbers(ids), wait).unwrap(),
            Operation::DeleteByGroup(group) => {
                collection
                    .delete_by_filter(&group_filter(*group), wait)
                    .unwrap();
            }
            Operation::Set(ids, update) => collection
                .set_payload(&numbers(ids), &text(update), wait)
                .unwrap(),
            Operation::Overwrite(ids, update) => collection
                .overwrite_payload(&numbers(ids), &text(update), wait)
                .unwrap(),
            Operation::DeleteKeys(ids, keys) => collection
                .delete_payload_keys(&numbers(ids), keys, wait)
                .unwrap(),
            Operation::CreateIndex(field, kind) => {
                collection.create_payload_index(fs, field, *kind).unwrap();
            }
        }
    }
}

pub fn group_filter(group: i64) -> Filter {
    Filter::parse(
        &json!({"must": [{"key": "g", "match": {"value": group}}]}),
        "filter",
    )
    .unwrap()
}

/// Ids of the points whose payload has `g` equal to `group`, ascending.
pub fn group_members(state: &State, group: i64) -> Vec<u64> {
    state
        .iter()
        .filter(|(_, stored)| {
            stored
                .payload
                .as_ref()
                .is_some_and(|payload| payload.get("g") == Some(&json!(group)))
        })
        .map(|(id, _)| *id)
        .collect()
}

impl Write {
    pub fn ids(&self) -> Vec<u64> {
        match self {
            Write::Upsert(points) => points.iter().map(|(id, _)| *id).collect(),
            Write::Delete(ids)
            | Write::Set(ids, _)
            | Write::Overwrite(ids, _)
            | Write::DeleteKeys(ids, _) => ids.clone(),
        }
    }

    /// The same write restricted to `ids`.
    pub fn restricted(&self, ids: Vec<u64>) -> Write {
        match self {
            Write::Upsert(points) => Write::Upsert(
                points
                    .iter()
                    .filter(|(id, _)| ids.contains(id))
                    .cloned()
                    .collect(),
            ),
            Write::Delete(_) => Write::Delete(ids),
            Write::Set(_, payload) => Write::Set(ids, payload.clone()),
            Write::Overwrite(_, payload) => Write::Overwrite(ids, payload.clone()),
            Write::DeleteKeys(_, keys) => Write::DeleteKeys(ids, keys.clone()),
        }
    }

    /// What the engine does with it: unknown ids are ignored by every kind but upsert;
    /// within an upsert the last of repeated ids wins.
    pub fn apply(&self, state: &mut State) {
        match self {
            Write::Upsert(points) => {
                for (id, stored) in points {
                    state.insert(*id, stored.clone());
                }
            }
            Write::Delete(ids) => ids.iter().for_each(|id| {
                state.remove(id);
            }),
            Write::Set(ids, update) | Write::Overwrite(ids, update) => {
                let merge = matches!(self, Write::Set(..));
                for id in ids {
                    if let Some(stored) = state.get_mut(id) {
                        let mut object = match (&stored.payload, merge) {
                            (Some(current), true) => current.clone(),
                            _ => Map::new(),
                        };
                        object.extend(update.clone());
                        stored.payload = Some(object);
                    }
                }
            }
            Write::DeleteKeys(ids, keys) => {
                for id in ids {
                    if let Some(Stored {
                        payload: Some(object),
                        ..
                    }) = state.get_mut(id)
                    {
                        keys.iter().for_each(|key| {
                            object.remove(key);
                        });
                    }
                }
            }
        }
    }
}

pub fn replay(writes: &[Write]) -> State {
    let mut state = State::new();
    writes.iter().for_each(|write| write.apply(&mut state));
    state
}

pub fn numbers(ids: &[u64]) -> Vec<PointId> {
    ids.iter().map(|id| PointId::Number(*id)).collect()
}

/// Every field of every point of `collection`, checked for duplicates and against `count`
/// and `get`.
pub fn engine_state(collection: &Collection, context: &str) -> State {
    let points = collection.points().unwrap();
    let count = points.len();
    let state: State = points
        .into_iter()
        .map(|point| {
            let PointId::Number(id) = point.id else {
                panic!("{context}: a uuid appeared")
            };
            let payload = point.payload.map(|text| {
                match serde_json::from_str::<Value>(&text).expect("stored payloads parse") {
                    Value::Object(object) => object,
                    other => panic!("{context}: payload {other} is not an object"),
                }
            });
            let (vector, side) = (point.vector, point.side);
            (
                id,
                Stored {
                    vector,
                    payload,
                    side,
                },
            )
        })
        .collect();
    assert_eq!(state.len(), count, "{context}: a point appears twice");
    assert_eq!(collection.count(None).unwrap(), count, "{context}: count");
    for (id, stored) in &state {
        let got = collection
            .get(&PointId::Number(*id))
            .unwrap_or_else(|error| panic!("{context}: get({id}) failed: {error}"))
            .unwrap_or_else(|| panic!("{context}: get({id}) is None"));
        assert!(
            same_bits(&got.vector, &stored.vector) && got.side == stored.side,
            "{context}: get({id}): {:?} {:?} vs {:?} {:?}",
            got.vector,
            got.side,
            stored.vector,
            stored.side
        );
    }
    state
}

/// The points where `expected` and `got` differ, one line each.
pub fn differences(expected: &State, got: &State) -> String {
    let ids: std::collections::BTreeSet<&u64> = expected.keys().chain(got.keys()).collect();
    ids.into_iter()
        .filter(|id| expected.get(id) != got.get(id))
        .map(|id| {
            format!(
                "  {id}: model {:?} engine {:?}",
                expected.get(id),
                got.get(id)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A collection of the named vectors `spaces` over `shard_count` shards, default storage.
pub fn named_collection(
    fs: &dyn FileSystem,
    directory: &std::path::Path,
    spaces: &sagitta_engine::VectorSpaces,
    shard_count: usize,
) -> Collection {
    let base = sagitta_engine::CollectionConfig {
        dim: 1,
        distance: sagitta_engine::Distance::Dot,
        shard_count,
        storage: sagitta_engine::StorageConfig::default(),
    };
    Collection::create_with_spaces(fs, directory, base.named(spaces), spaces.clone(), &[]).unwrap()
}

/// Points by id, as a side-vector test's model keeps them.
pub type PointModel = BTreeMap<u64, Point>;

/// Drives a collection of `points` points (made by `make`, kept in the model as `stored`
/// makes them) through every state a point can be in, calling `check` in each: in the
/// write buffer, sealed, sealed with rewrites and deletes buffered, merged into one
/// segment, and after a restart.
pub fn through_every_state(
    (fs, collection, directory): (&dyn FileSystem, Collection, &std::path::Path),
    points: u64,
    make: &mut dyn FnMut(u64) -> Point,
    stored: &dyn Fn(Point) -> Point,
    check: &dyn Fn(&Collection, &PointModel, &str),
) {
    let number = |point: &Point| match point.id {
        PointId::Number(id) => id,
        PointId::Uuid(_) => unreachable!("numbered points"),
    };
    let mut model = PointModel::new();
    let first: Vec<Point> = (0..points / 2).map(&mut *make).collect();
    model.extend(first.iter().map(|p| (number(p), stored(p.clone()))));
    collection.upsert(first, true).unwrap();
    check(&collection, &model, "in the write buffer");
    collection.optimize(fs).unwrap();
    check(&collection, &model, "sealed");
    let second: Vec<Point> = (points / 2..points).chain(0..60).map(&mut *make).collect();
    model.extend(second.iter().map(|p| (number(p), stored(p.clone()))));
    collection.upsert(second, true).unwrap();
    let deleted: Vec<PointId> = (100..150).map(PointId::Number).collect();
    collection.delete(&deleted, true).unwrap();
    model.retain(|id, _| !(100..150).contains(id));
    check(&collection, &model, "sealed and buffered");
    collection.optimize(fs).unwrap();
    let mut policy = collection.policy();
    policy.max_segments = 1;
    collection.set_policy(policy);
    while collection.maintain(fs).unwrap() {}
    check(&collection, &model, "merged");
    let spaces = collection.spaces().clone();
    drop(collection);
    let reopened = Collection::open(fs, directory).unwrap();
    assert_eq!(reopened.spaces(), &spaces);
    check(&reopened, &model, "after a restart");
}

//! The write buffer of a shard: the points written since its last seal, in slots (a
//! contiguous vector array, so an exact scan streams memory), searchable as soon as a write
//! is applied.

use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;

use serde_json::Value;

use crate::codec::Operation;
use crate::filter::Filter;
use crate::point::{Distance, Point, PointId};
use crate::shard::ShardHit;

#[derive(Default)]
pub(crate) struct Buffer {
    pub slots: HashMap<PointId, usize>,
    pub ids: Vec<Option<PointId>>,
    vectors: Vec<f32>,
    /// Parsed once at apply time so filters never re-parse JSON.
    payloads: Vec<Option<Arc<Value>>>,
    free: Vec<usize>,
}

impl Buffer {
    /// Merges (`merge`) or replaces each listed point's payload with the object `payload`.
    /// Unknown ids are skipped; `payload` was validated as a JSON object before logging.
    fn change_payloads(&mut self, ids: &[PointId], payload: &str, merge: bool) {
        let Ok(Value::Object(update)) = serde_json::from_str::<Value>(payload) else {
            return;
        };
        for id in ids {
            let Some(slot) = self.slots.get(id).copied() else {
                continue;
            };
            let mut object = match (self.payloads[slot].as_deref(), merge) {
                (Some(Value::Object(current)), true) => current.clone(),
                _ => serde_json::Map::new(),
            };
            object.extend(update.clone());
            self.payloads[slot] = Some(Arc::new(Value::Object(object)));
        }
    }

    pub fn apply(&mut self, operation: Operation, dim: usize) {
        match operation {
            Operation::Upsert(points) => {
                for point in points {
                    let slot = match self.slots.get(&point.id) {
                        Some(slot) => *slot,
                        None => {
                            let slot = self.free.pop().unwrap_or_else(|| {
                                self.ids.push(None);
                                self.payloads.push(None);
                                self.vectors.resize(self.vectors.len() + dim, 0.0);
                                self.ids.len() - 1
                            });
                            self.slots.insert(point.id, slot);
                            slot
                        }
                    };
                    self.ids[slot] = Some(point.id);
                    self.vectors[slot * dim..(slot + 1) * dim].copy_from_slice(&point.vector);
                    // Payloads were validated as JSON objects before they were logged.
                    self.payloads[slot] = point
                        .payload
                        .and_then(|text| serde_json::from_str(&text).ok())
                        .map(Arc::new);
                }
            }
            Operation::Delete(ids) => {
                for id in ids {
                    if let Some(slot) = self.slots.remove(&id) {
                        self.ids[slot] = None;
                        self.payloads[slot] = None;
                        self.free.push(slot);
                    }
                }
            }
            Operation::SetPayload { ids, payload } => self.change_payloads(&ids, &payload, true),
            Operation::OverwritePayload { ids, payload } => {
                self.change_payloads(&ids, &payload, false);
            }
            Operation::DeletePayloadKeys { ids, keys } => {
                for id in ids {
                    let Some(slot) = self.slots.get(&id).copied() else {
                        continue;
                    };
                    if let Some(Value::Object(map)) = self.payloads[slot].as_deref() {
                        let mut map = map.clone();
                        for key in &keys {
                            map.remove(key);
                        }
                        self.payloads[slot] = Some(Arc::new(Value::Object(map)));
                    }
                }
            }
        }
    }
}

/// A scored candidate; ordered so the heap's root is the worst kept.
#[derive(Clone, Copy, PartialEq)]
pub(crate) struct Candidate {
    /// Lower is closer.
    pub distance: f32,
    pub slot: usize,
}

impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.distance
            .total_cmp(&other.distance)
            .then(self.slot.cmp(&other.slot))
    }
}

impl Buffer {
    pub fn point(&self, slot: usize, dim: usize) -> Point {
        Point {
            id: self.ids[slot].expect("live slot"),
            vector: self.vectors[slot * dim..(slot + 1) * dim].to_vec(),
            payload: self.payloads[slot].as_deref().map(Value::to_string),
        }
    }

    pub fn points(&self, dim: usize) -> Vec<Point> {
        self.ids
            .iter()
            .enumerate()
            .filter(|(_, id)| id.is_some())
            .map(|(slot, _)| self.point(slot, dim))
            .collect()
    }

    /// Ids passing `filter`, except those in `excluded`.
    pub fn matching_ids(
        &self,
        filter: Option<&Filter>,
        excluded: Option<&HashSet<PointId>>,
    ) -> Vec<PointId> {
        self.slots
            .iter()
            .filter(|(id, slot)| {
                !excluded.is_some_and(|excluded| excluded.contains(*id))
                    && filter.is_none_or(|f| f.matches(id, self.payloads[**slot].as_deref()))
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// Exact top-`k` by scanning the buffer, skipping ids in `excluded`.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&Filter>,
        excluded: Option<&HashSet<PointId>>,
        dim: usize,
        distance: Distance,
    ) -> Vec<ShardHit> {
        let kernels = sagitta_kernels::kernels();
        let mut heap: BinaryHeap<Candidate> = BinaryHeap::with_capacity(k + 1);
        for (slot, id) in self.ids.iter().enumerate() {
            let Some(id) = id else {
                continue;
            };
            if excluded.is_some_and(|excluded| excluded.contains(id))
                || filter.is_some_and(|f| !f.matches(id, self.payloads[slot].as_deref()))
            {
                continue;
            }
            let row = &self.vectors[slot * dim..(slot + 1) * dim];
            let candidate = match distance {
                Distance::Euclid => (kernels.l2_squared_f32)(query, row),
                Distance::Cosine | Distance::Dot => -(kernels.dot_f32)(query, row),
            };
            if heap.len() < k {
                heap.push(Candidate {
                    distance: candidate,
                    slot,
                });
            } else if let Some(mut worst) = heap.peek_mut() {
                if candidate < worst.distance {
                    *worst = Candidate {
                        distance: candidate,
                        slot,
                    };
                }
            }
        }
        heap.into_sorted_vec()
            .into_iter()
            .map(|candidate| ShardHit {
                distance: candidate.distance,
                point: self.point(candidate.slot, dim),
            })
            .collect()
    }
}

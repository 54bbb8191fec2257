//! The shard's ownership invariants, checked in full (O(points)) by tests.

use std::collections::{HashMap, HashSet};

use crate::point::PointId;

use super::Shard;

impl Shard {
    /// Checks the shard's ownership invariants, returning the first violated: every live
    /// point is in exactly one place (the buffer, the frozen buffer being sealed, or one
    /// segment); the buffer's slot map and slot ids agree; a segment's live count equals
    /// its live nodes; segment ids are unique. O(points): for tests and `debug` checks.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        let segments = self.segments.read();
        let frozen = self.frozen.read();
        let buffer = self.buffer.read();
        let mut owner: HashMap<PointId, String> = HashMap::new();
        let mut claim = |id: PointId, place: String| match owner.insert(id, place.clone()) {
            Some(other) => Err(format!("point {id} is live in {other} and in {place}")),
            None => Ok(()),
        };
        for (id, slot) in &buffer.slots {
            if buffer.ids.get(*slot) != Some(&Some(*id)) {
                return Err(format!("buffer slot {slot} of point {id} holds another id"));
            }
            claim(*id, "the buffer".to_string())?;
        }
        let live_slots = buffer.ids.iter().filter(|id| id.is_some()).count();
        if live_slots != buffer.slots.len() {
            return Err(format!(
                "buffer: {live_slots} live slots for {} ids",
                buffer.slots.len()
            ));
        }
        if let Some(frozen) = frozen.as_ref() {
            let removed = frozen.removed.lock();
            for id in frozen
                .buffer
                .slots
                .keys()
                .filter(|id| !removed.contains(id))
            {
                claim(*id, "the frozen buffer".to_string())?;
            }
        }
        let mut ids = HashSet::new();
        for segment in segments.iter() {
            if !ids.insert(segment.id()) {
                return Err(format!("segment {} is listed twice", segment.id()));
            }
            let mut live = 0;
            for id in segment.live_ids(None) {
                claim(id, format!("segment {}", segment.id()))?;
                live += 1;
            }
            if live != segment.live_count() {
                return Err(format!(
                    "segment {} counts {} live points, holds {live}",
                    segment.id(),
                    segment.live_count()
                ));
            }
        }
        Ok(())
    }
}

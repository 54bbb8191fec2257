//! Partial top-k lists: what a rank found for each query of a batch (ids and scores; the
//! payloads are fetched for the final k only), their merge, and their bytes on the wire.

use std::cmp::Ordering;

use sagitta_engine::{Distance, PointId};
use sagitta_storage::codec::{DecodeError, Reader, Writer};

/// One hit: a point and its score as the user sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hit {
    pub id: PointId,
    pub score: f32,
}

/// Per query of a batch, its best hits so far, best first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Partial {
    /// The batch these lists answer (a late answer to an earlier batch is told apart).
    pub batch: u64,
    pub lists: Vec<Vec<Hit>>,
    /// Ranks whose lists are not in these (they did not answer in time), ascending.
    pub missing: Vec<usize>,
}

/// The order of hits under `distance`, as a single process ranks them: closer first
/// (higher similarity for Cosine and Dot, lower distance for Euclid), then lower id.
pub fn closer(distance: Distance) -> impl Fn(&Hit, &Hit) -> Ordering {
    move |a, b| {
        let by_score = match distance {
            Distance::Euclid => a.score.total_cmp(&b.score),
            Distance::Cosine | Distance::Dot => b.score.total_cmp(&a.score),
        };
        by_score.then(a.id.cmp(&b.id))
    }
}

impl Partial {
    /// Merges `other` (lists for the same queries) into this one, keeping each query's
    /// best `k`. Each input list is already ordered, so a query's merge is one pass.
    ///
    /// # Panics
    /// If the two hold lists for different numbers of queries.
    pub fn merge(&mut self, other: Partial, k: usize, distance: Distance) {
        assert_eq!(self.lists.len(), other.lists.len(), "one batch");
        self.missing.extend(other.missing);
        self.missing.sort_unstable();
        let order = closer(distance);
        for (mine, theirs) in self.lists.iter_mut().zip(other.lists) {
            let mut merged = Vec::with_capacity(k.min(mine.len() + theirs.len()));
            let (mut a, mut b) = (mine.iter().peekable(), theirs.iter().peekable());
            while merged.len() < k {
                let next = match (a.peek(), b.peek()) {
                    (Some(x), Some(y)) if order(x, y) != Ordering::Greater => a.next(),
                    (Some(_), Some(_)) | (None, Some(_)) => b.next(),
                    (Some(_), None) => a.next(),
                    (None, None) => break,
                };
                merged.extend(next.copied());
            }
            *mine = merged;
        }
    }

    /// The wire form: `version u8 = 1 | batch u64 | query_count u32 | per query:
    /// hit_count u32 | per hit: kind u8 (0 number, 1 uuid) | id u64 or u128 | score f32 |
    /// missing_count u32 | missing ranks u32…`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Writer::new();
        out.u8(WIRE_VERSION)
            .u64(self.batch)
            .len_u32(self.lists.len(), "queries in a batch");
        for list in &self.lists {
            out.len_u32(list.len(), "hits of a query");
            for hit in list {
                match hit.id {
                    PointId::Number(id) => out.u8(0).u64(id),
                    PointId::Uuid(id) => out.u8(1).u128(id),
                };
                out.f32(hit.score);
            }
        }
        out.len_u32(self.missing.len(), "missing ranks");
        for &rank in &self.missing {
            out.len_u32(rank, "a rank");
        }
        out.into_bytes()
    }

    /// Reads [`Partial::encode`]'s bytes; errors name the byte and the field.
    pub fn decode(bytes: &[u8]) -> Result<Partial, DecodeError> {
        let mut reader = Reader::new(bytes);
        reader.version_u8("version", "partial top-k", WIRE_VERSION)?;
        let batch = reader.u64("batch")?;
        let queries = reader.count_u32("query_count", 4)?;
        let mut lists = Vec::with_capacity(queries);
        for _ in 0..queries {
            let hits = reader.count_u32("hit_count", 13)?;
            let mut list = Vec::with_capacity(hits);
            for _ in 0..hits {
                let id = match reader.u8("id kind")? {
                    0 => PointId::Number(reader.u64("id")?),
                    1 => PointId::Uuid(reader.u128("id")?),
                    kind => {
                        return Err(Reader::invalid_at(
                            reader.offset() - 1,
                            "id kind",
                            format!("unknown code {kind}"),
                        ))
                    }
                };
                list.push(Hit {
                    id,
                    score: reader.f32("score")?,
                });
            }
            lists.push(list);
        }
        let missing_count = reader.count_u32("missing_count", 4)?;
        let missing = (0..missing_count)
            .map(|_| reader.u32("missing rank").map(|rank| rank as usize))
            .collect::<Result<Vec<_>, _>>()?;
        reader.expect_end("end of the partial top-k")?;
        Ok(Partial {
            batch,
            lists,
            missing,
        })
    }
}

const WIRE_VERSION: u8 = 1;

#[cfg(test)]
mod tests {
    use super::{Hit, Partial};
    use sagitta_engine::{Distance, PointId};

    fn hits(pairs: &[(u64, f32)]) -> Vec<Hit> {
        pairs
            .iter()
            .map(|&(id, score)| Hit {
                id: PointId::Number(id),
                score,
            })
            .collect()
    }

    fn of(lists: Vec<Vec<Hit>>, missing: Vec<usize>) -> Partial {
        Partial {
            batch: 0,
            lists,
            missing,
        }
    }

    #[test]
    fn merging_keeps_the_best_k_in_a_single_process_order() {
        // Dot: higher first; equal scores: the lower id first
        let mut a = of(
            vec![hits(&[(1, 0.9), (4, 0.5)]), hits(&[(3, 3.0), (2, 1.0)])],
            vec![5],
        );
        let b = of(
            vec![hits(&[(7, 0.9), (0, 0.8)]), hits(&[(9, 0.5)])],
            vec![6, 2],
        );
        a.merge(b, 3, Distance::Dot);
        assert_eq!(a.lists[0], hits(&[(1, 0.9), (7, 0.9), (0, 0.8)]));
        assert_eq!(a.lists[1], hits(&[(3, 3.0), (2, 1.0), (9, 0.5)]));
        assert_eq!(a.missing, vec![2, 5, 6]);
        // Euclid: lower first
        let mut c = of(
            vec![hits(&[(4, 0.5), (1, 0.9)]), hits(&[(2, 1.0), (3, 3.0)])],
            Vec::new(),
        );
        let d = of(
            vec![hits(&[(0, 0.8), (7, 0.9)]), hits(&[(9, 0.5)])],
            Vec::new(),
        );
        c.merge(d, 2, Distance::Euclid);
        assert_eq!(c.lists[0], hits(&[(4, 0.5), (0, 0.8)]));
        assert_eq!(c.lists[1], hits(&[(9, 0.5), (2, 1.0)]));
        // k larger than both: everything, in order
        let mut e = of(vec![hits(&[(5, 2.0)])], Vec::new());
        e.merge(
            of(vec![hits(&[(6, 1.0)])], Vec::new()),
            10,
            Distance::Cosine,
        );
        assert_eq!(e.lists[0], hits(&[(5, 2.0), (6, 1.0)]));
    }

    #[test]
    fn the_wire_form_round_trips_and_damage_names_the_field() {
        let uuid = Hit {
            id: PointId::Uuid(u128::MAX - 3),
            score: -0.25,
        };
        let number = Hit {
            id: PointId::Number(42),
            score: f32::MIN_POSITIVE,
        };
        let partial = Partial {
            batch: 77,
            lists: vec![vec![uuid, number], Vec::new()],
            missing: vec![3],
        };
        let bytes = partial.encode();
        let hits_bytes = (1 + 16 + 4) + (1 + 8 + 4);
        assert_eq!(bytes.len(), 1 + 8 + 4 + 4 + hits_bytes + 4 + 4 + 4);
        assert_eq!(Partial::decode(&bytes), Ok(partial));
        let message = |bytes: &[u8]| Partial::decode(bytes).unwrap_err().to_string();
        let mut kind = bytes.clone();
        kind[17] = 5;
        assert_eq!(message(&kind), "at byte 17: id kind: unknown code 5");
        assert_eq!(
            message(&bytes[..28]),
            "at byte 13: hit_count: 2 items need at least 26 bytes, 11 remain"
        );
        let mut version = bytes.clone();
        version[0] = 2;
        assert!(
            message(&version).contains("version 2"),
            "{}",
            message(&version)
        );
        let mut longer = bytes;
        longer.push(0);
        let error = message(&longer);
        assert!(error.contains("end of the partial top-k"), "{error}");
    }
}

//! A batch of queries as rank 0 sends it to every rank.

use sagitta_engine::{Collection, EngineError, SearchRequest, Strategy};
use sagitta_storage::codec::{DecodeError, Reader, Writer};

use crate::topk::{Hit, Partial};

/// Queries against one collection, each for its best `limit` hits, searched with `ef`
/// (0: exact). A batch with `limit` 0 tells the ranks to stop.
#[derive(Clone, Debug, PartialEq)]
pub struct QueryBatch {
    /// Rank 0's number for the batch (the partial lists answering it carry it).
    pub number: u64,
    pub collection: String,
    pub limit: usize,
    pub ef: usize,
    pub dim: usize,
    /// `dim` values per query, query after query.
    pub vectors: Vec<f32>,
}

const WIRE_VERSION: u8 = 1;

impl QueryBatch {
    /// The number of queries.
    pub fn len(&self) -> usize {
        self.vectors.len().checked_div(self.dim).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Query `i`'s vector.
    pub fn query(&self, i: usize) -> &[f32] {
        &self.vectors[i * self.dim..(i + 1) * self.dim]
    }

    /// This batch searched in `collection` (a rank's own points): each query's best
    /// `limit` hits, exact when `ef` is 0, numbered as the batch.
    pub fn search(&self, collection: &Collection) -> Result<Partial, EngineError> {
        let strategy = if self.ef == 0 {
            Strategy::Exact
        } else {
            Strategy::Beam(self.ef)
        };
        let requests: Vec<SearchRequest<'_>> = (0..self.len())
            .map(|i| SearchRequest {
                strategy,
                ..SearchRequest::new(self.query(i), self.limit)
            })
            .collect();
        let lists = collection
            .query_batch(&requests)?
            .into_iter()
            .map(|hits| {
                hits.iter()
                    .map(|hit| Hit {
                        id: hit.id,
                        score: hit.score,
                    })
                    .collect()
            })
            .collect();
        Ok(Partial {
            batch: self.number,
            lists,
            missing: Vec::new(),
        })
    }

    /// `version u8 = 1 | number u64 | name_length u16 | name | limit u32 | ef u32 |
    /// dim u32 | value_count u32 | values f32…`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Writer::with_capacity(32 + self.collection.len() + self.vectors.len() * 4);
        out.u8(WIRE_VERSION)
            .u64(self.number)
            .str_u16(&self.collection, "collection name")
            .len_u32(self.limit, "limit")
            .len_u32(self.ef, "ef")
            .len_u32(self.dim, "dim")
            .len_u32(self.vectors.len(), "values")
            .f32s(&self.vectors);
        out.into_bytes()
    }

    /// Reads [`QueryBatch::encode`]'s bytes; errors name the byte and the field.
    pub fn decode(bytes: &[u8]) -> Result<QueryBatch, DecodeError> {
        let mut reader = Reader::new(bytes);
        reader.version_u8("version", "query batch", WIRE_VERSION)?;
        let number = reader.u64("number")?;
        let collection = reader.str_u16("collection name")?.to_string();
        let limit = reader.u32("limit")? as usize;
        let ef = reader.u32("ef")? as usize;
        let at = reader.offset();
        let dim = reader.u32("dim")? as usize;
        let count = reader.count_u32("value_count", 4)?;
        if dim == 0 || count % dim != 0 {
            return Err(Reader::invalid_at(
                at,
                "dim",
                format!("{count} values are not whole queries of {dim}"),
            ));
        }
        let vectors = sagitta_storage::codec::f32s(reader.bytes(count * 4, "values")?).collect();
        reader.expect_end("end of the query batch")?;
        Ok(QueryBatch {
            number,
            collection,
            limit,
            ef,
            dim,
            vectors,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::QueryBatch;

    #[test]
    fn a_batch_round_trips_and_a_ragged_one_is_refused() {
        let batch = QueryBatch {
            number: 9,
            collection: "docs".to_string(),
            limit: 10,
            ef: 64,
            dim: 3,
            vectors: vec![1.0, -2.5, 0.0, 4.0, 5.0, f32::MAX],
        };
        assert_eq!(batch.len(), 2);
        assert_eq!(batch.query(1), &[4.0, 5.0, f32::MAX]);
        let bytes = batch.encode();
        assert_eq!(QueryBatch::decode(&bytes), Ok(batch.clone()));
        let ragged = QueryBatch {
            vectors: vec![1.0; 4],
            ..batch
        }
        .encode();
        let error = QueryBatch::decode(&ragged).unwrap_err().to_string();
        assert_eq!(
            error,
            "at byte 23: dim: 4 values are not whole queries of 3"
        );
    }

    #[test]
    fn a_batch_searches_a_collection_exactly_and_keeps_its_number() {
        use sagitta_engine::{Collection, CollectionConfig, Distance, Point, PointId};
        let fs = sagitta_storage::sim::SimFileSystem::new();
        let config = CollectionConfig {
            dim: 2,
            distance: Distance::Dot,
            shard_count: 2,
            storage: sagitta_engine::StorageConfig::default(),
        };
        let collection = Collection::create(&fs, std::path::Path::new("/c"), config).unwrap();
        let points: Vec<Point> = (1..=5_u64)
            .map(|id| Point {
                id: PointId::Number(id),
                vector: vec![id as f32, 0.0],
                payload: None,
                side: Vec::new(),
            })
            .collect();
        collection.upsert(points, true).unwrap();
        let batch = QueryBatch {
            number: 4,
            collection: "c".to_string(),
            limit: 2,
            ef: 0,
            dim: 2,
            vectors: vec![1.0, 0.0, -1.0, 0.0],
        };
        let partial = batch.search(&collection).unwrap();
        assert_eq!(partial.batch, 4);
        let ids: Vec<Vec<PointId>> = partial
            .lists
            .iter()
            .map(|hits| hits.iter().map(|hit| hit.id).collect())
            .collect();
        let n = PointId::Number;
        assert_eq!(ids, vec![vec![n(5), n(4)], vec![n(1), n(2)]]);
        assert_eq!(partial.lists[0][0].score, 5.0);
    }
}

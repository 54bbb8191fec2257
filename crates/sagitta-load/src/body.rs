//! Request bodies, serialized once before any timed phase.

use bytes::Bytes;
use serde::Serialize;

#[derive(Serialize)]
struct Params {
    hnsw_ef: usize,
}

#[derive(Serialize)]
struct QueryBody<'a> {
    query: &'a [f32],
    limit: usize,
    with_payload: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<Params>,
}

/// `{"query":[..],"limit":k,"with_payload":false}` plus `"params":{"hnsw_ef":ef}` when set:
/// the body of `POST /collections/{c}/points/query` with a raw-list query.
pub fn query_body(vector: &[f32], limit: usize, hnsw_ef: Option<usize>) -> Bytes {
    let body = QueryBody {
        query: vector,
        limit,
        with_payload: false,
        params: hnsw_ef.map(|hnsw_ef| Params { hnsw_ef }),
    };
    Bytes::from(serde_json::to_vec(&body).expect("a query body serializes"))
}

#[derive(Serialize)]
struct Point<'a> {
    id: u64,
    vector: &'a [f32],
}

#[derive(Serialize)]
struct Points<'a> {
    points: Vec<Point<'a>>,
}

/// `{"points":[{"id":first,"vector":[..]}, ..]}` for consecutive rows of a row-major matrix
/// (`rows` holds whole rows of `dim` values; ids are row numbers starting at `first_id`).
pub fn upsert_body(rows: &[f32], dim: usize, first_id: u64) -> Bytes {
    let points = rows
        .chunks_exact(dim.max(1))
        .zip(first_id..)
        .map(|(vector, id)| Point { id, vector })
        .collect();
    Bytes::from(serde_json::to_vec(&Points { points }).expect("an upsert body serializes"))
}

/// `{"vectors":{"size":dim,"distance":"Cosine"},"shard_number":shards}`.
pub fn create_collection_body(dim: usize, shards: usize) -> Bytes {
    let body = serde_json::json!({
        "vectors": {"size": dim, "distance": "Cosine"},
        "shard_number": shards,
    });
    Bytes::from(serde_json::to_vec(&body).expect("a collection body serializes"))
}

/// Upsert bodies for all of `data` in batches of `batch` rows, built on all cores.
pub fn upsert_bodies(data: &[f32], dim: usize, batch: usize) -> Vec<Bytes> {
    let dim = dim.max(1);
    let batch = batch.max(1);
    let batches: Vec<(u64, &[f32])> = data
        .chunks(dim * batch)
        .enumerate()
        .map(|(i, rows)| ((i * batch) as u64, rows))
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(batches.len().max(1));
    let per_thread = batches.len().div_ceil(threads).max(1);
    let mut out = vec![Bytes::new(); batches.len()];
    std::thread::scope(|scope| {
        for (slots, work) in out.chunks_mut(per_thread).zip(batches.chunks(per_thread)) {
            scope.spawn(move || {
                for (slot, (first, rows)) in slots.iter_mut().zip(work) {
                    *slot = upsert_body(rows, dim, *first);
                }
            });
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn parse(bytes: &Bytes) -> Value {
        serde_json::from_slice(bytes).unwrap()
    }

    #[test]
    fn query_body_with_and_without_ef() {
        let body = query_body(&[0.5, -1.0, 0.125], 10, None);
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            r#"{"query":[0.5,-1.0,0.125],"limit":10,"with_payload":false}"#
        );
        let body = query_body(&[1.0], 3, Some(64));
        assert_eq!(
            parse(&body),
            json!({"query": [1.0], "limit": 3, "with_payload": false, "params": {"hnsw_ef": 64}})
        );
    }

    #[test]
    fn floats_round_trip_exactly() {
        let values = [0.1f32, 1.0e-30, 3.402_823_5e38, -7.654_321e-5];
        let body = query_body(&values, 1, None);
        let parsed: Vec<f32> = parse(&body)["query"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(parsed, values);
    }

    #[test]
    fn upsert_bodies_cover_every_row_with_row_ids() {
        let dim = 2;
        let data: Vec<f32> = (0..7 * dim).map(|v| v as f32).collect();
        let bodies = upsert_bodies(&data, dim, 3);
        assert_eq!(bodies.len(), 3);
        let first = parse(&bodies[0]);
        assert_eq!(
            first,
            json!({"points": [
                {"id": 0, "vector": [0.0, 1.0]},
                {"id": 1, "vector": [2.0, 3.0]},
                {"id": 2, "vector": [4.0, 5.0]},
            ]})
        );
        let last = parse(&bodies[2]);
        assert_eq!(last, json!({"points": [{"id": 6, "vector": [12.0, 13.0]}]}));
        assert_eq!(
            parse(&create_collection_body(16, 2)),
            json!({"vectors": {"size": 16, "distance": "Cosine"}, "shard_number": 2})
        );
    }
}

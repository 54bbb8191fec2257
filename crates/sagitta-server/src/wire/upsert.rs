//! `PUT /collections/{c}/points`: the points of an upsert, in the list form or the
//! batch form, checked and turned into engine points. Payloads pass through as raw JSON
//! text, which is what the engine stores.

use sagitta_engine::{Point, VectorSpaces};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::fields::{NoShardKeys, NullOnly};
use super::{check_count, payload_text, BatchVectors, IdInput, VectorInput};
use crate::error::{ApiError, ApiResult};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointInput {
    pub id: IdInput,
    pub vector: VectorInput,
    #[serde(default)]
    pub payload: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchInput {
    pub ids: Vec<IdInput>,
    pub vectors: BatchVectors,
    #[serde(default)]
    pub payloads: Option<Vec<Option<Box<RawValue>>>>,
}

/// `PUT /collections/{c}/points`: the list form or the batch form.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpsertRequest {
    #[serde(default)]
    pub points: Option<Vec<PointInput>>,
    #[serde(default)]
    pub batch: Option<BatchInput>,
    #[serde(default)]
    pub shard_key: Option<NullOnly<NoShardKeys>>,
    /// Existing points are replaced only where this filter matches them.
    #[serde(default)]
    pub update_filter: Option<Value>,
    #[serde(default)]
    pub update_mode: Option<UpdateMode>,
}

/// `update_mode` of an upsert.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum UpdateMode {
    /// Insert new points, replace existing ones.
    #[default]
    Upsert,
    /// Insert new points; existing ones keep their state.
    InsertOnly,
    /// Replace existing points; new ones are not inserted.
    UpdateOnly,
}

impl UpsertRequest {
    /// The points, checked against `max_points` and the collection's named vectors
    /// `spaces`; errors name the point's position.
    pub fn into_points(self, max_points: usize, spaces: &VectorSpaces) -> ApiResult<Vec<Point>> {
        let points = match (self.points, self.batch) {
            (Some(_), Some(_)) => {
                return Err(ApiError::bad_request(
                    "Wrong input: give either `points` or `batch`, not both",
                ))
            }
            (None, None) => {
                return Err(ApiError::bad_request(
                    "Wrong input: the body needs `points` (a list) or `batch`",
                ))
            }
            (Some(points), None) => {
                check_count("points", points.len(), max_points)?;
                points
                    .into_iter()
                    .enumerate()
                    .map(|(index, point)| {
                        let (vector, side) = point
                            .vector
                            .into_stored(&format!("points[{index}].vector"), spaces)?;
                        Ok(Point {
                            id: point.id.0,
                            vector,
                            payload: payload_text(
                                point.payload,
                                &format!("points[{index}].payload"),
                            )?,
                            side,
                        })
                    })
                    .collect::<ApiResult<Vec<Point>>>()?
            }
            (None, Some(batch)) => {
                check_count("batch.ids", batch.ids.len(), max_points)?;
                let rows = batch.ids.len();
                let vectors = batch.vectors.into_rows(rows, spaces)?;
                let payloads = match batch.payloads {
                    Some(payloads) if payloads.len() != rows => {
                        return Err(ApiError::bad_request(format!(
                            "Wrong input: `batch.payloads` has {} entries for {rows} ids",
                            payloads.len()
                        )))
                    }
                    Some(payloads) => payloads,
                    None => vec![None; rows],
                };
                batch
                    .ids
                    .into_iter()
                    .zip(vectors)
                    .zip(payloads)
                    .enumerate()
                    .map(|(index, ((id, (vector, side)), payload))| {
                        Ok(Point {
                            id: id.0,
                            vector,
                            payload: payload_text(payload, &format!("batch.payloads[{index}]"))?,
                            side,
                        })
                    })
                    .collect::<ApiResult<Vec<Point>>>()?
            }
        };
        Ok(points)
    }
}

#[cfg(test)]
mod tests {
    use sagitta_engine::PointId;

    use super::*;
    use crate::body::parse;

    #[test]
    fn both_upsert_forms_and_both_id_kinds() {
        let list: UpsertRequest = parse(
            br#"{"points":[{"id":1,"vector":[1,2]},
                {"id":"5c56c793-69f3-4fbf-87e6-c4bf54c28c26","vector":{"":[3,4]},
                 "payload":{"a":1}}]}"#,
        )
        .unwrap();
        let points = list.into_points(10, &VectorSpaces::default()).unwrap();
        assert_eq!(points[0].id, PointId::Number(1));
        assert_eq!(points[1].vector, vec![3.0, 4.0]);
        assert!(matches!(points[1].id, PointId::Uuid(_)));
        assert_eq!(points[1].payload.as_deref(), Some(r#"{"a":1}"#));
        let batch: UpsertRequest =
            parse(br#"{"batch":{"ids":[1,2],"vectors":[[1,2],[3,4]],"payloads":[{"a":1},null]}}"#)
                .unwrap();
        let points = batch.into_points(10, &VectorSpaces::default()).unwrap();
        assert_eq!(points.len(), 2);
        assert_eq!(points[1].payload, None);
    }

    #[test]
    fn bad_points_name_their_position() {
        let named: UpsertRequest =
            parse(br#"{"points":[{"id":1,"vector":[1]},{"id":2,"vector":{"text":[1]}}]}"#).unwrap();
        let error = named.into_points(10, &VectorSpaces::default()).unwrap_err();
        assert!(
            error.message.contains("points[1].vector"),
            "{}",
            error.message
        );
        let error = parse::<UpsertRequest>(br#"{"points":[{"id":-1,"vector":[1]}]}"#)
            .err()
            .unwrap();
        assert!(error.message.contains("points[0].id"), "{}", error.message);
        let error = parse::<UpsertRequest>(br#"{"points":[{"id":1,"vector":[1,"x"]}]}"#)
            .err()
            .unwrap();
        assert!(
            error.message.contains("points[0].vector"),
            "{}",
            error.message
        );
        let many: UpsertRequest =
            parse(br#"{"batch":{"ids":[1,2,3],"vectors":[[1],[2],[3]]}}"#).unwrap();
        assert_eq!(
            many.into_points(2, &VectorSpaces::default())
                .unwrap_err()
                .status
                .as_u16(),
            413
        );
    }
}

//! `qdrant.Points`: every RPC answered by the REST route that does the same.

use axum::http::Method;
use serde_json::{json, Value};
use tonic::metadata::MetadataMap;
use tonic::{Request, Response, Status};

use super::api;
use super::api::points_server::Points;
use super::query;
use super::reply::{self, Reply};
use super::request::{self as to, filter, invalid, point_ids, selectors, some_filter, Obj};
use super::rest::{collection, escape, Answer, Call, Rest};

pub struct PointsService {
    pub rest: Rest,
}

type Done<T> = Result<Response<T>, Status>;

fn operation(answer: &Answer) -> api::PointsOperationResponse {
    api::PointsOperationResponse {
        result: Some(reply::update_result(&answer.result)),
        time: answer.time,
        usage: None,
    }
}

fn hits(answer: &Answer) -> Reply<Vec<api::ScoredPoint>> {
    reply::scored_points(&answer.result)
}

/// Each list of hits of a batch answer.
fn batches(answer: &Answer) -> Reply<Vec<api::BatchResult>> {
    answer
        .result
        .as_array()
        .ok_or_else(|| Status::internal("a batch answer is not a list"))?
        .iter()
        .map(|one| {
            Ok(api::BatchResult {
                result: reply::scored_points(one)?,
            })
        })
        .collect()
}

impl PointsService {
    async fn run(&self, metadata: &MetadataMap, call: Call) -> Reply<Answer> {
        self.rest.run(metadata, call).await
    }

    /// A write to `rest` of `name` (`?wait=` and `?timeout=` as asked).
    async fn write(
        &self,
        metadata: &MetadataMap,
        method: Method,
        (name, rest): (&str, &str),
        (wait, timeout): (Option<bool>, Option<u64>),
        body: Value,
    ) -> Done<api::PointsOperationResponse> {
        let call = Call::new(method, collection(name, rest))
            .query("wait", wait)
            .query("timeout", timeout)
            .json(&body);
        Ok(Response::new(operation(&self.run(metadata, call).await?)))
    }

    /// A read of `rest` of `name` with `body`.
    async fn read(
        &self,
        metadata: &MetadataMap,
        (name, rest): (&str, &str),
        timeout: Option<u64>,
        body: Value,
    ) -> Reply<Answer> {
        let call = Call::new(Method::POST, collection(name, rest))
            .query("timeout", timeout)
            .json(&body);
        self.run(metadata, call).await
    }

    /// The hits a search-like read of `rest` of `name` answers, and its time.
    async fn scored(
        &self,
        metadata: &MetadataMap,
        target: (&str, &str),
        timeout: Option<u64>,
        body: Value,
    ) -> Reply<(Vec<api::ScoredPoint>, f64)> {
        let answer = self.read(metadata, target, timeout, body).await?;
        Ok((hits(&answer)?, answer.time))
    }

    /// Each of `requests` (converted by `convert`) as one batch read of `rest` of `name`:
    /// the hits of each, and the time.
    async fn batched<T>(
        &self,
        metadata: &MetadataMap,
        target: (&str, &str),
        timeout: Option<u64>,
        (requests, convert): (&[T], fn(&T) -> to::Json),
    ) -> Reply<(Vec<api::BatchResult>, f64)> {
        let searches = requests
            .iter()
            .map(convert)
            .collect::<Result<Vec<_>, _>>()?;
        let body = json!({ "searches": searches });
        let answer = self.read(metadata, target, timeout, body).await?;
        Ok((batches(&answer)?, answer.time))
    }
}

fn payload_body(
    payload: &std::collections::HashMap<String, api::Value>,
    points: Option<&api::PointsSelector>,
    key: Option<&String>,
) -> Result<Value, Status> {
    let obj = Obj::new()
        .put("payload", to::payload(payload)?)
        .opt("key", key.cloned());
    Ok(to::selector(obj, points)?.done())
}

/// `field_schema` of an index request: the type, or its parameters.
fn field_schema(r: &api::CreateFieldIndexCollection) -> Result<Value, Status> {
    use api::payload_index_params::IndexParams;
    let kind = match r.field_type.map(api::FieldType::try_from) {
        Some(Ok(api::FieldType::Keyword)) => "keyword",
        Some(Ok(api::FieldType::Integer)) => "integer",
        Some(Ok(api::FieldType::Float)) => "float",
        Some(Ok(api::FieldType::Geo)) => "geo",
        Some(Ok(api::FieldType::Text)) => "text",
        Some(Ok(api::FieldType::Bool)) => "bool",
        Some(Ok(api::FieldType::Datetime)) => "datetime",
        Some(Ok(api::FieldType::Uuid)) => "uuid",
        _ => return Err(invalid("field_type", "missing or unknown")),
    };
    let Some(params) = r
        .field_index_params
        .as_ref()
        .and_then(|p| p.index_params.as_ref())
    else {
        return Ok(json!(kind));
    };
    let obj = Obj::new().put("type", kind);
    Ok(match params {
        IndexParams::KeywordIndexParams(p) => obj
            .opt("is_tenant", p.is_tenant)
            .opt("on_disk", p.on_disk)
            .opt("enable_hnsw", p.enable_hnsw),
        IndexParams::IntegerIndexParams(p) => obj
            .opt("lookup", p.lookup)
            .opt("range", p.range)
            .opt("is_principal", p.is_principal)
            .opt("on_disk", p.on_disk)
            .opt("enable_hnsw", p.enable_hnsw),
        IndexParams::FloatIndexParams(p) => obj
            .opt("on_disk", p.on_disk)
            .opt("is_principal", p.is_principal)
            .opt("enable_hnsw", p.enable_hnsw),
        IndexParams::GeoIndexParams(p) => obj
            .opt("on_disk", p.on_disk)
            .opt("enable_hnsw", p.enable_hnsw),
        IndexParams::BoolIndexParams(p) => obj
            .opt("on_disk", p.on_disk)
            .opt("enable_hnsw", p.enable_hnsw),
        IndexParams::DatetimeIndexParams(p) => obj
            .opt("on_disk", p.on_disk)
            .opt("is_principal", p.is_principal)
            .opt("enable_hnsw", p.enable_hnsw),
        IndexParams::UuidIndexParams(p) => obj
            .opt("is_tenant", p.is_tenant)
            .opt("on_disk", p.on_disk)
            .opt("enable_hnsw", p.enable_hnsw),
        IndexParams::TextIndexParams(text) => {
            let tokenizer = match api::TokenizerType::try_from(text.tokenizer) {
                Ok(api::TokenizerType::Prefix) => "prefix",
                Ok(api::TokenizerType::Whitespace) => "whitespace",
                Ok(api::TokenizerType::Multilingual) => "multilingual",
                _ => "word",
            };
            obj.put("tokenizer", tokenizer)
                .opt("lowercase", text.lowercase)
                .opt("min_token_len", text.min_token_len)
                .opt("max_token_len", text.max_token_len)
                .opt("phrase_matching", text.phrase_matching)
                .opt("ascii_folding", text.ascii_folding)
                .opt("on_disk", text.on_disk)
                .opt("enable_hnsw", text.enable_hnsw)
        }
    }
    .done())
}

/// One operation of an update batch as REST's batch operation.
fn batch_operation(op: &api::PointsUpdateOperation) -> Result<Value, Status> {
    use api::points_update_operation::Operation;
    let ids_or_filter = |selector: Option<&api::PointsSelector>| -> Result<Value, Status> {
        Ok(to::selector(Obj::new(), selector)?.done())
    };
    Ok(match &op.operation {
        Some(Operation::Upsert(list)) => {
            let points = list
                .points
                .iter()
                .map(to::point)
                .collect::<Result<Vec<_>, _>>()?;
            json!({"upsert": Obj::new().put("points", points).with("update_filter", list.update_filter.as_ref(), filter)?.done()})
        }
        Some(Operation::DeletePoints(d)) => json!({"delete": ids_or_filter(d.points.as_ref())?}),
        Some(Operation::DeleteDeprecated(s)) => json!({"delete": ids_or_filter(Some(s))?}),
        Some(Operation::SetPayload(s)) => {
            json!({"set_payload": payload_body(&s.payload, s.points_selector.as_ref(), s.key.as_ref())?})
        }
        Some(Operation::OverwritePayload(s)) => {
            json!({"overwrite_payload": payload_body(&s.payload, s.points_selector.as_ref(), s.key.as_ref())?})
        }
        Some(Operation::DeletePayload(d)) => {
            let obj = to::selector(
                Obj::new().put("keys", json!(d.keys)),
                d.points_selector.as_ref(),
            )?;
            json!({"delete_payload": obj.done()})
        }
        Some(Operation::ClearPayload(c)) => {
            json!({"clear_payload": ids_or_filter(c.points.as_ref())?})
        }
        Some(Operation::ClearPayloadDeprecated(s)) => {
            json!({"clear_payload": ids_or_filter(Some(s))?})
        }
        Some(Operation::UpdateVectors(u)) => {
            json!({"update_vectors": update_vectors_body(&u.points, u.update_filter.as_ref())?})
        }
        Some(Operation::DeleteVectors(d)) => {
            let names = d
                .vectors
                .as_ref()
                .map(|v| v.names.clone())
                .unwrap_or_default();
            let obj = to::selector(
                Obj::new().put("vector", json!(names)),
                d.points_selector.as_ref(),
            )?;
            json!({"delete_vectors": obj.done()})
        }
        None => {
            return Err(invalid(
                "operations",
                "an operation of no kind this server knows",
            ))
        }
    })
}

fn update_vectors_body(
    points: &[api::PointVectors],
    update_filter: Option<&api::Filter>,
) -> Result<Value, Status> {
    let points = points
        .iter()
        .map(|p| {
            let id =
                p.id.as_ref()
                    .ok_or_else(|| invalid("points.id", "missing"))?;
            let vectors = p
                .vectors
                .as_ref()
                .ok_or_else(|| invalid("points.vectors", "missing"))?;
            Ok(json!({"id": to::point_id(id)?, "vector": to::vectors(vectors)?}))
        })
        .collect::<Result<Vec<_>, Status>>()?;
    Ok(Obj::new()
        .put("points", points)
        .with("update_filter", update_filter, filter)?
        .done())
}

#[tonic::async_trait]
impl Points for PointsService {
    async fn upsert(
        &self,
        request: Request<api::UpsertPoints>,
    ) -> Done<api::PointsOperationResponse> {
        /// The body of `PUT /collections/{c}/points`, its vectors borrowed from the message.
        #[derive(serde::Serialize)]
        struct Upsert<'a> {
            points: Vec<to::PointRef<'a>>,
            #[serde(skip_serializing_if = "Option::is_none")]
            update_filter: Option<Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            update_mode: Option<&'static str>,
        }
        let (metadata, _, r) = request.into_parts();
        let body = Upsert {
            points: r
                .points
                .iter()
                .map(to::point_ref)
                .collect::<Result<_, _>>()?,
            update_filter: r.update_filter.as_ref().map(filter).transpose()?,
            update_mode: r
                .update_mode
                .map(|mode| match api::UpdateMode::try_from(mode) {
                    Ok(api::UpdateMode::InsertOnly) => "insert_only",
                    Ok(api::UpdateMode::UpdateOnly) => "update_only",
                    _ => "upsert",
                }),
        };
        let call = Call::new(Method::PUT, collection(&r.collection_name, "/points"))
            .query("wait", r.wait)
            .query("timeout", r.timeout)
            .json(&body);
        Ok(Response::new(operation(&self.run(&metadata, call).await?)))
    }

    async fn delete(
        &self,
        request: Request<api::DeletePoints>,
    ) -> Done<api::PointsOperationResponse> {
        let (metadata, _, r) = request.into_parts();
        let body = to::selector(Obj::new(), r.points.as_ref())?.done();
        let target = (r.collection_name.as_str(), "/points/delete");
        self.write(&metadata, Method::POST, target, (r.wait, r.timeout), body)
            .await
    }

    async fn get(&self, request: Request<api::GetPoints>) -> Done<api::GetResponse> {
        let (metadata, _, r) = request.into_parts();
        let body = selectors(
            Obj::new().put("ids", point_ids(&r.ids)?),
            r.with_payload.as_ref(),
            r.with_vectors.as_ref(),
        );
        let answer = self
            .read(
                &metadata,
                (&r.collection_name, "/points"),
                r.timeout,
                body.done(),
            )
            .await?;
        Ok(Response::new(api::GetResponse {
            result: reply::retrieved_points(&answer.result)?,
            time: answer.time,
            usage: None,
        }))
    }

    async fn update_vectors(
        &self,
        request: Request<api::UpdatePointVectors>,
    ) -> Done<api::PointsOperationResponse> {
        let (metadata, _, r) = request.into_parts();
        let body = update_vectors_body(&r.points, r.update_filter.as_ref())?;
        let target = (r.collection_name.as_str(), "/points/vectors");
        self.write(&metadata, Method::PUT, target, (r.wait, r.timeout), body)
            .await
    }

    async fn delete_vectors(
        &self,
        request: Request<api::DeletePointVectors>,
    ) -> Done<api::PointsOperationResponse> {
        let (metadata, _, r) = request.into_parts();
        let names = r
            .vectors
            .as_ref()
            .map(|v| v.names.clone())
            .unwrap_or_default();
        let body = to::selector(
            Obj::new().put("vector", json!(names)),
            r.points_selector.as_ref(),
        )?
        .done();
        let target = (r.collection_name.as_str(), "/points/vectors/delete");
        self.write(&metadata, Method::POST, target, (r.wait, r.timeout), body)
            .await
    }

    async fn set_payload(
        &self,
        request: Request<api::SetPayloadPoints>,
    ) -> Done<api::PointsOperationResponse> {
        let (metadata, _, r) = request.into_parts();
        let body = payload_body(&r.payload, r.points_selector.as_ref(), r.key.as_ref())?;
        let target = (r.collection_name.as_str(), "/points/payload");
        self.write(&metadata, Method::POST, target, (r.wait, r.timeout), body)
            .await
    }

    async fn overwrite_payload(
        &self,
        request: Request<api::SetPayloadPoints>,
    ) -> Done<api::PointsOperationResponse> {
        let (metadata, _, r) = request.into_parts();
        let body = payload_body(&r.payload, r.points_selector.as_ref(), r.key.as_ref())?;
        let target = (r.collection_name.as_str(), "/points/payload");
        self.write(&metadata, Method::PUT, target, (r.wait, r.timeout), body)
            .await
    }

    async fn delete_payload(
        &self,
        request: Request<api::DeletePayloadPoints>,
    ) -> Done<api::PointsOperationResponse> {
        let (metadata, _, r) = request.into_parts();
        let body = to::selector(
            Obj::new().put("keys", json!(r.keys)),
            r.points_selector.as_ref(),
        )?
        .done();
        let target = (r.collection_name.as_str(), "/points/payload/delete");
        self.write(&metadata, Method::POST, target, (r.wait, r.timeout), body)
            .await
    }

    async fn clear_payload(
        &self,
        request: Request<api::ClearPayloadPoints>,
    ) -> Done<api::PointsOperationResponse> {
        let (metadata, _, r) = request.into_parts();
        let body = to::selector(Obj::new(), r.points.as_ref())?.done();
        let target = (r.collection_name.as_str(), "/points/payload/clear");
        self.write(&metadata, Method::POST, target, (r.wait, r.timeout), body)
            .await
    }

    async fn create_field_index(
        &self,
        request: Request<api::CreateFieldIndexCollection>,
    ) -> Done<api::PointsOperationResponse> {
        let (metadata, _, r) = request.into_parts();
        let body = json!({"field_name": r.field_name, "field_schema": field_schema(&r)?});
        let target = (r.collection_name.as_str(), "/index");
        self.write(&metadata, Method::PUT, target, (r.wait, r.timeout), body)
            .await
    }

    async fn delete_field_index(
        &self,
        request: Request<api::DeleteFieldIndexCollection>,
    ) -> Done<api::PointsOperationResponse> {
        let (metadata, _, r) = request.into_parts();
        let call = Call::new(
            Method::DELETE,
            collection(
                &r.collection_name,
                &format!("/index/{}", escape(&r.field_name)),
            ),
        )
        .query("wait", r.wait)
        .query("timeout", r.timeout);
        Ok(Response::new(operation(&self.run(&metadata, call).await?)))
    }

    async fn search(&self, request: Request<api::SearchPoints>) -> Done<api::SearchResponse> {
        let (metadata, _, r) = request.into_parts();
        let target = (r.collection_name.as_str(), "/points/search");
        let body = query::search_points(&r)?;
        let (result, time) = self.scored(&metadata, target, r.timeout, body).await?;
        Ok(Response::new(api::SearchResponse {
            result,
            time,
            usage: None,
        }))
    }

    async fn search_batch(
        &self,
        request: Request<api::SearchBatchPoints>,
    ) -> Done<api::SearchBatchResponse> {
        let (metadata, _, r) = request.into_parts();
        let target = (r.collection_name.as_str(), "/points/search/batch");
        let requests = (
            r.search_points.as_slice(),
            query::search_points as fn(&_) -> _,
        );
        let (result, time) = self.batched(&metadata, target, r.timeout, requests).await?;
        Ok(Response::new(api::SearchBatchResponse {
            result,
            time,
            usage: None,
        }))
    }

    async fn search_groups(
        &self,
        request: Request<api::SearchPointGroups>,
    ) -> Done<api::SearchGroupsResponse> {
        let (metadata, _, r) = request.into_parts();
        let body = query::search_groups(&r)?;
        let answer = self
            .read(
                &metadata,
                (&r.collection_name, "/points/search/groups"),
                r.timeout,
                body,
            )
            .await?;
        Ok(Response::new(api::SearchGroupsResponse {
            result: Some(reply::groups(&answer.result)?),
            time: answer.time,
            usage: None,
        }))
    }

    async fn scroll(&self, request: Request<api::ScrollPoints>) -> Done<api::ScrollResponse> {
        let (metadata, _, r) = request.into_parts();
        let obj = Obj::new()
            .with("filter", some_filter(r.filter.as_ref()), filter)?
            .with("offset", r.offset.as_ref(), to::point_id)?
            .opt("limit", r.limit)
            .with("order_by", r.order_by.as_ref(), to::order_by)?;
        let body = selectors(obj, r.with_payload.as_ref(), r.with_vectors.as_ref()).done();
        let answer = self
            .read(
                &metadata,
                (&r.collection_name, "/points/scroll"),
                r.timeout,
                body,
            )
            .await?;
        let next = match answer.result.get("next_page_offset") {
            Some(offset) if !offset.is_null() => Some(reply::point_id(offset)?),
            _ => None,
        };
        Ok(Response::new(api::ScrollResponse {
            next_page_offset: next,
            result: reply::retrieved_points(&answer.result["points"])?,
            time: answer.time,
            usage: None,
        }))
    }

    async fn recommend(
        &self,
        request: Request<api::RecommendPoints>,
    ) -> Done<api::RecommendResponse> {
        let (metadata, _, r) = request.into_parts();
        let target = (r.collection_name.as_str(), "/points/query");
        let body = query::recommend_points(&r)?;
        let (result, time) = self.scored(&metadata, target, r.timeout, body).await?;
        Ok(Response::new(api::RecommendResponse {
            result,
            time,
            usage: None,
        }))
    }

    async fn recommend_batch(
        &self,
        request: Request<api::RecommendBatchPoints>,
    ) -> Done<api::RecommendBatchResponse> {
        let (metadata, _, r) = request.into_parts();
        let target = (r.collection_name.as_str(), "/points/query/batch");
        let requests = (
            r.recommend_points.as_slice(),
            query::recommend_points as fn(&_) -> _,
        );
        let (result, time) = self.batched(&metadata, target, r.timeout, requests).await?;
        Ok(Response::new(api::RecommendBatchResponse {
            result,
            time,
            usage: None,
        }))
    }

    async fn discover(&self, request: Request<api::DiscoverPoints>) -> Done<api::DiscoverResponse> {
        let (metadata, _, r) = request.into_parts();
        let target = (r.collection_name.as_str(), "/points/query");
        let body = query::discover_points(&r)?;
        let (result, time) = self.scored(&metadata, target, r.timeout, body).await?;
        Ok(Response::new(api::DiscoverResponse {
            result,
            time,
            usage: None,
        }))
    }

    async fn discover_batch(
        &self,
        request: Request<api::DiscoverBatchPoints>,
    ) -> Done<api::DiscoverBatchResponse> {
        let (metadata, _, r) = request.into_parts();
        let target = (r.collection_name.as_str(), "/points/query/batch");
        let requests = (
            r.discover_points.as_slice(),
            query::discover_points as fn(&_) -> _,
        );
        let (result, time) = self.batched(&metadata, target, r.timeout, requests).await?;
        Ok(Response::new(api::DiscoverBatchResponse {
            result,
            time,
            usage: None,
        }))
    }

    async fn count(&self, request: Request<api::CountPoints>) -> Done<api::CountResponse> {
        let (metadata, _, r) = request.into_parts();
        let body = Obj::new()
            .with("filter", some_filter(r.filter.as_ref()), filter)?
            .opt("exact", r.exact)
            .done();
        let answer = self
            .read(
                &metadata,
                (&r.collection_name, "/points/count"),
                r.timeout,
                body,
            )
            .await?;
        let count = answer.result["count"]
            .as_u64()
            .ok_or_else(|| Status::internal("no count in the answer"))?;
        Ok(Response::new(api::CountResponse {
            result: Some(api::CountResult { count }),
            time: answer.time,
            usage: None,
        }))
    }

    async fn update_batch(
        &self,
        request: Request<api::UpdateBatchPoints>,
    ) -> Done<api::UpdateBatchResponse> {
        let (metadata, _, r) = request.into_parts();
        let operations = r
            .operations
            .iter()
            .map(batch_operation)
            .collect::<Result<Vec<_>, _>>()?;
        let call = Call::new(
            Method::POST,
            collection(&r.collection_name, "/points/batch"),
        )
        .query("wait", r.wait)
        .query("timeout", r.timeout)
        .json(&json!({"operations": operations}));
        let answer = self.run(&metadata, call).await?;
        let results = answer
            .result
            .as_array()
            .ok_or_else(|| Status::internal("a batch answer is not a list"))?;
        Ok(Response::new(api::UpdateBatchResponse {
            result: results.iter().map(reply::update_result).collect(),
            time: answer.time,
            usage: None,
        }))
    }

    async fn query(&self, request: Request<api::QueryPoints>) -> Done<api::QueryResponse> {
        let (metadata, _, r) = request.into_parts();
        let target = (r.collection_name.as_str(), "/points/query");
        let body = query::query_points(&r)?;
        let (result, time) = self.scored(&metadata, target, r.timeout, body).await?;
        Ok(Response::new(api::QueryResponse {
            result,
            time,
            usage: None,
        }))
    }

    async fn query_batch(
        &self,
        request: Request<api::QueryBatchPoints>,
    ) -> Done<api::QueryBatchResponse> {
        let (metadata, _, r) = request.into_parts();
        let target = (r.collection_name.as_str(), "/points/query/batch");
        let requests = (
            r.query_points.as_slice(),
            query::query_points as fn(&_) -> _,
        );
        let (result, time) = self.batched(&metadata, target, r.timeout, requests).await?;
        Ok(Response::new(api::QueryBatchResponse {
            result,
            time,
            usage: None,
        }))
    }

    async fn query_groups(
        &self,
        request: Request<api::QueryPointGroups>,
    ) -> Done<api::QueryGroupsResponse> {
        let (metadata, _, r) = request.into_parts();
        let body = query::query_groups(&r)?;
        let answer = self
            .read(
                &metadata,
                (&r.collection_name, "/points/query/groups"),
                r.timeout,
                body,
            )
            .await?;
        Ok(Response::new(api::QueryGroupsResponse {
            result: Some(reply::groups(&answer.result)?),
            time: answer.time,
            usage: None,
        }))
    }

    async fn facet(&self, request: Request<api::FacetCounts>) -> Done<api::FacetResponse> {
        let (metadata, _, r) = request.into_parts();
        let body = Obj::new()
            .put("key", r.key.clone())
            .with("filter", some_filter(r.filter.as_ref()), filter)?
            .opt("limit", r.limit)
            .opt("exact", r.exact)
            .done();
        let answer = self
            .read(&metadata, (&r.collection_name, "/facet"), r.timeout, body)
            .await?;
        Ok(Response::new(api::FacetResponse {
            hits: reply::facet_hits(&answer.result)?,
            time: answer.time,
            usage: None,
        }))
    }

    async fn search_matrix_pairs(
        &self,
        request: Request<api::SearchMatrixPoints>,
    ) -> Done<api::SearchMatrixPairsResponse> {
        let (metadata, _, r) = request.into_parts();
        let answer = self
            .read(
                &metadata,
                (&r.collection_name, "/points/search/matrix/pairs"),
                r.timeout,
                matrix_body(&r)?,
            )
            .await?;
        let pairs = answer.result["pairs"]
            .as_array()
            .ok_or_else(|| Status::internal("no pairs in the answer"))?
            .iter()
            .map(|pair| {
                Ok(api::SearchMatrixPair {
                    a: Some(reply::point_id(&pair["a"])?),
                    b: Some(reply::point_id(&pair["b"])?),
                    score: pair["score"].as_f64().unwrap_or(0.0) as f32,
                })
            })
            .collect::<Reply<Vec<_>>>()?;
        Ok(Response::new(api::SearchMatrixPairsResponse {
            result: Some(api::SearchMatrixPairs { pairs }),
            time: answer.time,
            usage: None,
        }))
    }

    async fn search_matrix_offsets(
        &self,
        request: Request<api::SearchMatrixPoints>,
    ) -> Done<api::SearchMatrixOffsetsResponse> {
        let (metadata, _, r) = request.into_parts();
        let answer = self
            .read(
                &metadata,
                (&r.collection_name, "/points/search/matrix/offsets"),
                r.timeout,
                matrix_body(&r)?,
            )
            .await?;
        let result = &answer.result;
        let numbers = |key: &str| {
            result[key]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default()
        };
        let scores = result["scores"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_f64)
                    .map(|s| s as f32)
                    .collect()
            })
            .unwrap_or_default();
        let ids = result["ids"]
            .as_array()
            .map(|a| a.iter().map(reply::point_id).collect::<Reply<Vec<_>>>())
            .transpose()?
            .unwrap_or_default();
        Ok(Response::new(api::SearchMatrixOffsetsResponse {
            result: Some(api::SearchMatrixOffsets {
                offsets_row: numbers("offsets_row"),
                offsets_col: numbers("offsets_col"),
                scores,
                ids,
            }),
            time: answer.time,
            usage: None,
        }))
    }
}

fn matrix_body(r: &api::SearchMatrixPoints) -> Result<Value, Status> {
    Ok(Obj::new()
        .with("filter", some_filter(r.filter.as_ref()), filter)?
        .opt("sample", r.sample)
        .opt("limit", r.limit)
        .opt("using", r.using.clone())
        .done())
}

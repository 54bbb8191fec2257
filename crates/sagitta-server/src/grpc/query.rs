//! Search messages as REST bodies: the universal query (with prefetches, fusion, order,
//! recommendation, discovery, MMR) and the older search, recommend and discover calls.

use serde_json::{json, Value};
use tonic::Status;

use super::api;
use super::request::{
    filter, invalid, lookup, order_by, point_id, search_params, selectors, some_filter, vector,
    vector_input, Json, Obj,
};

fn recommend_strategy(code: i32) -> &'static str {
    match api::RecommendStrategy::try_from(code) {
        Ok(api::RecommendStrategy::BestScore) => "best_score",
        Ok(api::RecommendStrategy::SumScores) => "sum_scores",
        _ => "average_vector",
    }
}

fn inputs(inputs: &[api::VectorInput]) -> Json {
    Ok(Value::Array(
        inputs.iter().map(vector_input).collect::<Result<_, _>>()?,
    ))
}

fn pairs(pairs: &[api::ContextInputPair]) -> Json {
    let pair = |p: &api::ContextInputPair| {
        Ok(json!({
            "positive": p.positive.as_ref().map(vector_input).transpose()?,
            "negative": p.negative.as_ref().map(vector_input).transpose()?,
        }))
    };
    Ok(Value::Array(
        pairs.iter().map(pair).collect::<Result<_, Status>>()?,
    ))
}

/// The `query` of a query request.
fn query(query: &api::Query) -> Json {
    use api::query::Variant;
    let plain = Ok;
    match &query.variant {
        Some(Variant::Nearest(input)) => plain(json!({"nearest": vector_input(input)?})),
        Some(Variant::NearestWithMmr(with)) => {
            let nearest = with
                .nearest
                .as_ref()
                .ok_or_else(|| invalid("query.nearest", "missing"))?;
            let mmr = with.mmr.as_ref().map_or_else(
                || json!({}),
                |m| {
                    Obj::new()
                        .opt("diversity", m.diversity)
                        .opt("candidates_limit", m.candidates_limit)
                        .done()
                },
            );
            Ok(json!({"nearest": vector_input(nearest)?, "mmr": mmr}))
        }
        Some(Variant::Recommend(r)) => plain(json!({"recommend": Obj::new()
            .put("positive", inputs(&r.positive)?)
            .put("negative", inputs(&r.negative)?)
            .opt("strategy", r.strategy.map(recommend_strategy))
            .done()})),
        Some(Variant::Discover(d)) => {
            let target = d
                .target
                .as_ref()
                .ok_or_else(|| invalid("query.discover.target", "missing"))?;
            let context = d
                .context
                .as_ref()
                .map_or(Ok(json!([])), |c| pairs(&c.pairs))?;
            plain(json!({"discover": {"target": vector_input(target)?, "context": context}}))
        }
        Some(Variant::Context(c)) => plain(json!({"context": pairs(&c.pairs)?})),
        Some(Variant::OrderBy(order)) => plain(json!({"order_by": order_by(order)?})),
        Some(Variant::Fusion(code)) => plain(json!({"fusion": match api::Fusion::try_from(*code) {
            Ok(api::Fusion::Dbsf) => "dbsf",
            _ => "rrf",
        }})),
        Some(Variant::Rrf(rrf)) => {
            let mut params = Obj::new().opt("k", rrf.k);
            if !rrf.weights.is_empty() {
                params = params.put("weights", json!(rrf.weights));
            }
            plain(json!({"rrf": params.done()}))
        }
        Some(Variant::Sample(_)) => plain(json!({"sample": "random"})),
        Some(Variant::Formula(_)) => {
            Err(Status::unimplemented("formula queries are not supported"))
        }
        Some(Variant::RelevanceFeedback(_)) => Err(Status::unimplemented(
            "relevance feedback queries are not supported",
        )),
        None => Err(invalid("query", "a query of no kind this server knows")),
    }
}

/// The fields a query and a prefetch share.
fn common(
    obj: Obj,
    q: Option<&api::Query>,
    using: Option<&String>,
    given: Option<&api::Filter>,
    params: Option<&api::SearchParams>,
) -> Result<Obj, Status> {
    obj.with("query", q, query)?
        .opt("using", using.cloned())
        .with("filter", some_filter(given), filter)?
        .with("params", params, search_params)
}

fn prefetch(p: &api::PrefetchQuery) -> Json {
    let obj = Obj::new().list("prefetch", &p.prefetch, prefetch)?;
    Ok(common(
        obj,
        p.query.as_ref(),
        p.using.as_ref(),
        p.filter.as_ref(),
        p.params.as_ref(),
    )?
    .opt("score_threshold", p.score_threshold)
    .opt("limit", p.limit)
    .with("lookup_from", p.lookup_from.as_ref(), lookup)?
    .done())
}

/// `POST /collections/{c}/points/query`'s body.
pub fn query_points(q: &api::QueryPoints) -> Json {
    let obj = Obj::new().list("prefetch", &q.prefetch, prefetch)?;
    let obj = common(
        obj,
        q.query.as_ref(),
        q.using.as_ref(),
        q.filter.as_ref(),
        q.params.as_ref(),
    )?
    .opt("score_threshold", q.score_threshold)
    .opt("limit", q.limit)
    .opt("offset", q.offset)
    .with("lookup_from", q.lookup_from.as_ref(), lookup)?;
    Ok(selectors(obj, q.with_payload.as_ref(), q.with_vectors.as_ref()).done())
}

/// `POST /collections/{c}/points/query/groups`' body.
pub fn query_groups(q: &api::QueryPointGroups) -> Json {
    let obj = Obj::new().list("prefetch", &q.prefetch, prefetch)?;
    let obj = common(
        obj,
        q.query.as_ref(),
        q.using.as_ref(),
        q.filter.as_ref(),
        q.params.as_ref(),
    )?
    .opt("score_threshold", q.score_threshold)
    .opt("limit", q.limit)
    .opt("group_size", q.group_size)
    .put("group_by", q.group_by.clone())
    .with("lookup_from", q.lookup_from.as_ref(), lookup)?
    .with("with_lookup", q.with_lookup.as_ref(), with_lookup)?;
    Ok(selectors(obj, q.with_payload.as_ref(), q.with_vectors.as_ref()).done())
}

fn with_lookup(w: &api::WithLookup) -> Json {
    Ok(selectors(
        Obj::new().put("collection", w.collection.clone()),
        w.with_payload.as_ref(),
        w.with_vectors.as_ref(),
    )
    .done())
}

/// The query of the older `Search`: the vector (named, sparse when indices come with it).
fn search_vector(s: &api::SearchPoints) -> Value {
    let plain = match &s.sparse_indices {
        Some(indices) => json!({"indices": indices.data, "values": s.vector}),
        None => json!(s.vector),
    };
    match &s.vector_name {
        Some(name) => json!({"name": name, "vector": plain}),
        None => plain,
    }
}

/// `POST /collections/{c}/points/search`'s body.
pub fn search_points(s: &api::SearchPoints) -> Json {
    let obj = Obj::new()
        .put("vector", search_vector(s))
        .with("filter", some_filter(s.filter.as_ref()), filter)?
        .put("limit", s.limit)
        .opt("offset", s.offset)
        .opt("score_threshold", s.score_threshold)
        .with("params", s.params.as_ref(), search_params)?;
    Ok(selectors(obj, s.with_payload.as_ref(), s.with_vectors.as_ref()).done())
}

/// `POST /collections/{c}/points/search/groups`' body.
pub fn search_groups(s: &api::SearchPointGroups) -> Json {
    let as_search = api::SearchPoints {
        vector: s.vector.clone(),
        vector_name: s.vector_name.clone(),
        sparse_indices: s.sparse_indices.clone(),
        ..api::SearchPoints::default()
    };
    let obj = Obj::new()
        .put("vector", search_vector(&as_search))
        .with("filter", some_filter(s.filter.as_ref()), filter)?
        .put("limit", s.limit)
        .put("group_by", s.group_by.clone())
        .put("group_size", s.group_size)
        .opt("score_threshold", s.score_threshold)
        .with("params", s.params.as_ref(), search_params)?
        .with("with_lookup", s.with_lookup.as_ref(), with_lookup)?;
    Ok(selectors(obj, s.with_payload.as_ref(), s.with_vectors.as_ref()).done())
}

/// The older `Recommend` as a universal query (the REST recommend route is the query
/// API's recommend input here too).
pub fn recommend_points(r: &api::RecommendPoints) -> Json {
    let examples = |ids: &[api::PointId], vectors: &[api::Vector]| -> Json {
        let mut all: Vec<Value> = ids.iter().map(point_id).collect::<Result<_, _>>()?;
        all.extend(vectors.iter().map(vector).collect::<Result<Vec<_>, _>>()?);
        Ok(Value::Array(all))
    };
    let recommend = Obj::new()
        .put("positive", examples(&r.positive, &r.positive_vectors)?)
        .put("negative", examples(&r.negative, &r.negative_vectors)?)
        .opt("strategy", r.strategy.map(recommend_strategy))
        .done();
    let obj = Obj::new()
        .put("query", json!({"recommend": recommend}))
        .opt("using", r.using.clone())
        .with("filter", some_filter(r.filter.as_ref()), filter)?
        .put("limit", r.limit)
        .opt("offset", r.offset)
        .opt("score_threshold", r.score_threshold)
        .with("params", r.params.as_ref(), search_params)?
        .with("lookup_from", r.lookup_from.as_ref(), lookup)?;
    Ok(selectors(obj, r.with_payload.as_ref(), r.with_vectors.as_ref()).done())
}

fn example(e: &api::VectorExample) -> Json {
    use api::vector_example::Example;
    match &e.example {
        Some(Example::Id(id)) => point_id(id),
        Some(Example::Vector(v)) => vector(v),
        None => Err(invalid("example", "neither an id nor a vector")),
    }
}

/// The older `Discover` as a universal query.
pub fn discover_points(d: &api::DiscoverPoints) -> Json {
    use api::target_vector::Target;
    let target = match d.target.as_ref().and_then(|t| t.target.as_ref()) {
        Some(Target::Single(single)) => Some(example(single)?),
        None => None,
    };
    let context = d
        .context
        .iter()
        .map(|pair| {
            Ok(json!({
                "positive": pair.positive.as_ref().map(example).transpose()?,
                "negative": pair.negative.as_ref().map(example).transpose()?,
            }))
        })
        .collect::<Result<Vec<_>, Status>>()?;
    let query = match target {
        Some(target) => json!({"discover": {"target": target, "context": context}}),
        None => json!({"context": context}),
    };
    let obj = Obj::new()
        .put("query", query)
        .opt("using", d.using.clone())
        .with("filter", some_filter(d.filter.as_ref()), filter)?
        .put("limit", d.limit)
        .opt("offset", d.offset)
        .with("params", d.params.as_ref(), search_params)?
        .with("lookup_from", d.lookup_from.as_ref(), lookup)?;
    Ok(selectors(obj, d.with_payload.as_ref(), d.with_vectors.as_ref()).done())
}

//! Requests through the router: every field Qdrant defines is honoured or refused by its
//! path, unknown fields are refused by path, and errors come in Qdrant's envelope.

mod support;

use axum::http::StatusCode;
use serde_json::{json, Value};
use support::{make_collection, server, Reply};

/// Errors come in Qdrant's envelope and name the field: a path that is not UTF-8, and
/// the alternatives of `vectors`, `with_payload`, `with_vector`, a search `vector` and
/// `field_schema`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_enveloped_and_name_the_field() {
    let server = server();
    make_collection(&server, "docs", 4, 3).await;
    let expect = |reply: Reply, status: StatusCode, words: &[&str]| {
        assert_eq!(reply.status, status, "{}", reply.body);
        let message = reply.body["status"]["error"]
            .as_str()
            .unwrap_or_else(|| panic!("not in the envelope: {}", reply.body))
            .to_string();
        assert!(reply.body["time"].is_number(), "{}", reply.body);
        for word in words {
            assert!(message.contains(word), "{word:?} not in {message:?}");
        }
    };
    for (method, path) in [
        ("GET", "/collections/%FF"),
        ("GET", "/collections/%C3%28/exists"),
        ("POST", "/collections/%FF/points/count"),
        ("PUT", "/collections/%FF"),
        ("GET", "/collections/docs/points/%FF"),
        ("DELETE", "/collections/docs/index/%FF"),
    ] {
        let body = if method == "PUT" {
            r#"{"vectors": {"size": 4, "distance": "Dot"}}"#
        } else {
            "{}"
        };
        expect(
            server.send(method, path, body, None).await,
            StatusCode::NOT_FOUND,
            &["UTF-8"],
        );
    }
    let create = |body: Value| server.call("PUT", "/collections/other", body);
    for (body, words) in [
        (
            json!({"vectors": {"size": 4, "distance": "Dott"}}),
            &["vectors.distance", "Dott"][..],
        ),
        (
            json!({"vectors": {"size": "four", "distance": "Dot"}}),
            &["vectors.size"],
        ),
        (json!({"vectors": {"size": 4}}), &["vectors", "distance"]),
        (
            json!({"vectors": {"": {"size": 4, "distance": "Manhattan"}}}),
            &["distance", "Manhattan"],
        ),
        (
            json!({"vectors": {"size": 4, "distance": "Dot", "on_dsk": true}}),
            &["vectors.on_dsk"],
        ),
        (json!({"vectors": [4, "Dot"]}), &["vectors"]),
        (
            json!({"vectors": {"size": 4, "distance": "Dot"},
                   "sagitta": {"segment_kind": "lsm"}}),
            &["sagitta.segment_kind", "lsm"],
        ),
        (
            json!({"vectors": {"size": 4, "distance": "Dot", "datatype": "uint8"}}),
            &["vectors.datatype", "uint8"],
        ),
        (
            json!({"vectors": {"size": 4, "distance": "Dot", "datatype": "float64"}}),
            &["vectors.datatype", "float64"],
        ),
        (
            json!({"vectors": {"size": 4, "distance": "Dot", "on_disk": "yes"}}),
            &["vectors.on_disk", "boolean"],
        ),
        (
            json!({"vectors": {"size": 4, "distance": "Dot"},
                   "sagitta": {"page_cache_mb": 9_999_999_999u64}}),
            &["sagitta.page_cache_mb"],
        ),
        (
            json!({"vectors": {"size": 4, "distance": "Dot"},
                   "sagitta": {"partition_size": 1}}),
            &["sagitta.partition_size", "between 2 and 100000"],
        ),
        (
            json!({"vectors": {"size": 4, "distance": "Dot"},
                   "sagitta": {"placement": "node:x"}}),
            &["sagitta.placement", "node:x", "spread"],
        ),
        (
            json!({"vectors": {"size": 4, "distance": "Dot"},
                   "sagitta": {"placement": "node:5000"}}),
            &["sagitta.placement", "at most 1023"],
        ),
        (
            json!({"vectors": {"size": 4, "distance": "Dot"},
                   "sagitta": {"vectors_tier": "cxl"}}),
            &["sagitta.vectors_tier", "cxl", "far", "vectors.on_disk"],
        ),
        (
            json!({"vectors": {"size": 4, "distance": "Dot", "on_disk": true},
                   "sagitta": {"vectors_tier": "far"}}),
            &["sagitta.vectors_tier", "vectors.on_disk"],
        ),
        (
            json!({"vectors": {"size": 4, "distance": "Dot"},
                   "sagitta": {"vectors_tier": "far", "segment_kind": "disk"}}),
            &["sagitta.vectors_tier", "disk segments"],
        ),
        (
            json!({"vectors": {"size": 4, "distance": "Dot"},
                   "sagitta": {"segmnt_kind": "disk"}}),
            &["sagitta", "segmnt_kind"],
        ),
    ] {
        expect(create(body).await, StatusCode::BAD_REQUEST, words);
    }
    assert_eq!(
        server
            .call("GET", "/collections/other", json!({}))
            .await
            .status,
        StatusCode::NOT_FOUND,
        "no refused create left a collection"
    );
    let query = "/collections/docs/points/query";
    for (body, words) in [
        (
            json!({"query": [1, 0, 0, 0], "with_payload": {"includ": ["a"]}}),
            &["with_payload", "includ"][..],
        ),
        (
            json!({"query": [1, 0, 0, 0], "with_payload": {"include": "a"}}),
            &["with_payload.include"],
        ),
        (
            json!({"query": [1, 0, 0, 0], "with_payload": 3}),
            &["with_payload"],
        ),
        (
            json!({"query": [1, 0, 0, 0], "with_vector": "yes"}),
            &["with_vector"],
        ),
        (
            json!({"searches": [{"query": [1, 0, 0, 0], "with_vector": [1]}]}),
            &["searches[0].with_vector[0]"],
        ),
    ] {
        let path = if body.get("searches").is_some() {
            "/collections/docs/points/query/batch"
        } else {
            query
        };
        expect(
            server.call("POST", path, body).await,
            StatusCode::BAD_REQUEST,
            words,
        );
    }
    expect(
        server
            .call(
                "POST",
                "/collections/docs/points/search",
                json!({"vector": {"name": "", "vectr": [1, 0, 0, 0]}, "limit": 1}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["vector", "vectr"],
    );
    expect(
        server
            .call(
                "PUT",
                "/collections/docs/index",
                json!({"field_name": "a", "field_schema": {"typ": "keyword"}}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["field_schema", "typ"],
    );
    expect(
        server
            .call(
                "PUT",
                "/collections/docs/index",
                json!({"field_name": "a", "field_schema": 5}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        &["field_schema"],
    );
    let exists = server
        .ok("GET", "/collections/other/exists", json!(null))
        .await;
    assert_eq!(exists["exists"], false);
}

/// `update_mode`, `update_filter` and `lookup_from` are honoured as in Qdrant; bad
/// `metadata` and `strict_mode_config` are refused naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_upserts_and_lookup_from_are_honoured() {
    let server = server();
    server
        .ok(
            "PUT",
            "/collections/docs",
            json!({"vectors": {"size": 2, "distance": "Cosine"}}),
        )
        .await;
    let upsert = "/collections/docs/points?wait=true";
    server
        .ok(
            "PUT",
            upsert,
            json!({"points": [{"id": 1, "vector": [1, 0], "payload": {"color": "red"}},
                              {"id": 2, "vector": [0, 1], "payload": {"color": "blue"}}]}),
        )
        .await;
    let payloads = |ids: Value| {
        let server = &server;
        async move {
            let records = server
                .ok("POST", "/collections/docs/points", json!({ "ids": ids }))
                .await;
            records
                .as_array()
                .unwrap()
                .iter()
                .map(|record| (record["id"].as_u64().unwrap(), record["payload"].clone()))
                .collect::<Vec<_>>()
        }
    };
    // insert_only: existing points keep their state, new ones are inserted.
    server
        .ok(
            "PUT",
            upsert,
            json!({"points": [{"id": 1, "vector": [0, 1], "payload": {"color": "green"}},
                              {"id": 3, "vector": [1, 1], "payload": {"color": "green"}},
                              {"id": 3, "vector": [1, 1], "payload": {"color": "late"}}],
                   "update_mode": "insert_only"}),
        )
        .await;
    assert_eq!(
        payloads(json!([1, 3])).await,
        vec![(1, json!({"color": "red"})), (3, json!({"color": "green"}))]
    );
    // update_only: existing points are replaced, new ones are not inserted.
    server
        .ok(
            "PUT",
            upsert,
            json!({"batch": {"ids": [2, 4], "vectors": [[0, 1], [1, 0]],
                             "payloads": [{"color": "navy"}, {"color": "new"}]},
                   "update_mode": "update_only"}),
        )
        .await;
    assert_eq!(
        payloads(json!([2, 4])).await,
        vec![(2, json!({"color": "navy"}))]
    );
    // update_filter: existing points are updated only where it matches; new ones inserted.
    server
        .ok(
            "PUT",
            upsert,
            json!({"points": [{"id": 1, "vector": [1, 0], "payload": {"color": "red", "v": 2}},
                              {"id": 2, "vector": [0, 1], "payload": {"color": "navy", "v": 2}},
                              {"id": 5, "vector": [1, 0], "payload": {"color": "blue", "v": 2}}],
                   "update_filter": {"must": [{"key": "color", "match": {"value": "red"}}]}}),
        )
        .await;
    assert_eq!(
        payloads(json!([1, 2, 5])).await,
        vec![
            (1, json!({"color": "red", "v": 2})),
            (2, json!({"color": "navy"})),
            (5, json!({"color": "blue", "v": 2}))
        ]
    );
    server
        .ok(
            "PUT",
            upsert,
            json!({"points": [{"id": 1, "vector": [1, 0], "payload": {"color": "pink"}}],
                   "update_mode": "upsert", "update_filter": null, "shard_key": null}),
        )
        .await;
    assert_eq!(
        payloads(json!([1])).await,
        vec![(1, json!({"color": "pink"}))]
    );
    for (body, words) in [
        (
            json!({"points": [{"id": 9, "vector": [1, 0]}], "update_mode": "sometimes"}),
            &["update_mode", "sometimes"][..],
        ),
        (
            json!({"points": [{"id": 9, "vector": [1, 0]}],
                   "update_filter": {"must": [{"key": "a", "range": {"gt": "x"}}]}}),
            &["update_filter"],
        ),
        (
            json!({"points": [{"id": 9, "vector": [1, 0]}], "shard_key": "s1"}),
            &["shard_key"],
        ),
    ] {
        let reply = server.call("PUT", upsert, body).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let message = reply.body["status"]["error"].as_str().unwrap();
        for word in words {
            assert!(message.contains(word), "{word:?} not in {message:?}");
        }
    }
    assert_eq!(server.count("docs").await, 4);
    // lookup_from: the query point's vector comes from the named collection, and the id
    // is left out of the results only when that is the collection searched.
    server
        .ok(
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 2, "distance": "Dot"}}),
        )
        .await;
    server
        .ok(
            "PUT",
            "/collections/other/points?wait=true",
            json!({"points": [{"id": 1, "vector": [0, 1]}, {"id": 77, "vector": [1, 0.01]}]}),
        )
        .await;
    let ids = |result: &Value| -> Vec<u64> {
        result["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|hit| hit["id"].as_u64().unwrap())
            .collect()
    };
    let query = "/collections/docs/points/query";
    let looked_up = server
        .ok(
            "POST",
            query,
            json!({"query": 1, "lookup_from": {"collection": "other"}, "limit": 2,
                   "params": {"exact": true}}),
        )
        .await;
    assert_eq!(ids(&looked_up), vec![2, 3]);
    let looked_up = server
        .ok(
            "POST",
            query,
            json!({"query": {"nearest": 77}, "lookup_from": {"collection": "other", "vector": ""},
                   "limit": 1, "params": {"exact": true}}),
        )
        .await;
    assert_eq!(ids(&looked_up)[0], 1);
    let same = server
        .ok(
            "POST",
            query,
            json!({"query": 1, "lookup_from": {"collection": "docs"}, "limit": 1,
                   "params": {"exact": true}}),
        )
        .await;
    assert_eq!(ids(&same), vec![5]);
    for (body, status, words) in [
        (
            json!({"query": 1, "lookup_from": {"collection": "nope"}}),
            StatusCode::NOT_FOUND,
            &["nope"][..],
        ),
        (
            json!({"query": 5, "lookup_from": {"collection": "other"}}),
            StatusCode::NOT_FOUND,
            &["5", "other"],
        ),
        (
            json!({"query": 1, "lookup_from": {"collection": "other", "vector": "text"}}),
            StatusCode::BAD_REQUEST,
            &["lookup_from.vector", "text"],
        ),
        (
            json!({"query": 1, "lookup_from": {"collection": "other", "shard_key": "a"}}),
            StatusCode::BAD_REQUEST,
            &["lookup_from.shard_key"],
        ),
    ] {
        let reply = server.call("POST", query, body).await;
        assert_eq!(reply.status, status, "{}", reply.body);
        let message = reply.body["status"]["error"].as_str().unwrap();
        for word in words {
            assert!(message.contains(word), "{word:?} not in {message:?}");
        }
    }
    // metadata and strict_mode_config: null is accepted; bad ones are refused naming
    // the field, and nothing is created
    server
        .ok(
            "PUT",
            "/collections/third",
            json!({"vectors": {"size": 2, "distance": "Dot"}, "metadata": null,
                   "strict_mode_config": null}),
        )
        .await;
    for (body, field) in [
        (json!({"metadata": [1]}), "metadata"),
        (
            json!({"strict_mode_config": {"max_timeout": 5}}),
            "max_timeout",
        ),
        (
            json!({"strict_mode_config": {"max_query_limit": -1}}),
            "strict_mode_config",
        ),
    ] {
        let mut create = json!({"vectors": {"size": 2, "distance": "Dot"}});
        create
            .as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        let reply = server.call("PUT", "/collections/fourth", create).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let message = reply.body["status"]["error"].as_str().unwrap();
        assert!(message.contains(field), "{field:?} not in {message:?}");
    }
    let exists = server
        .ok("GET", "/collections/fourth/exists", json!(null))
        .await;
    assert_eq!(exists["exists"], false);
}

/// Collection `metadata` is kept and merged key by key; `strict_mode_config`'s limits
/// are enforced while enabled: query limits (400), batch sizes (400) and the write rate
/// (429 with Retry-After, or without it for a request no minute's budget could hold).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_is_kept_and_strict_mode_is_enforced() {
    let server = server();
    server
        .ok(
            "PUT",
            "/collections/strict",
            json!({"vectors": {"size": 2, "distance": "Dot"}, "metadata": {"team": "a"},
                   "strict_mode_config": {"enabled": true, "max_query_limit": 5,
                                          "upsert_max_batchsize": 4, "write_rate_limit": 6}}),
        )
        .await;
    server
        .ok(
            "PATCH",
            "/collections/strict",
            json!({"metadata": {"due": "soon"}, "strict_mode_config": {"read_rate_limit": 100}}),
        )
        .await;
    let info = server.ok("GET", "/collections/strict", json!(null)).await;
    assert_eq!(
        info["config"]["metadata"],
        json!({"team": "a", "due": "soon"})
    );
    let strict = &info["config"]["strict_mode_config"];
    assert_eq!(strict["max_query_limit"], 5);
    assert_eq!(strict["read_rate_limit"], 100);
    let points = |ids: std::ops::Range<u64>| {
        let points: Vec<Value> = ids
            .map(|id| json!({"id": id, "vector": [1.0, 0.5]}))
            .collect();
        json!({ "points": points })
    };
    let path = "/collections/strict/points?wait=true";
    let too_many = server.call("PUT", path, points(0..5)).await;
    assert_eq!(
        too_many.status,
        StatusCode::BAD_REQUEST,
        "{}",
        too_many.body
    );
    assert!(too_many.body["status"]["error"]
        .as_str()
        .unwrap()
        .contains("upsert_max_batchsize"));
    server.ok("PUT", path, points(0..4)).await;
    // 6 points a minute: 4 spent, 2 left
    let over = server.call("PUT", path, points(4..7)).await;
    assert_eq!(over.status, StatusCode::TOO_MANY_REQUESTS, "{}", over.body);
    assert!(over.retry_after.is_some());
    server.ok("PUT", path, points(4..6)).await;
    let query = |limit: u64| json!({"query": [1.0, 0.0], "limit": limit});
    let refused = server
        .call("POST", "/collections/strict/points/query", query(6))
        .await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.body);
    assert!(refused.body["status"]["error"]
        .as_str()
        .unwrap()
        .contains("\"limit\""));
    let hits = server
        .ok("POST", "/collections/strict/points/query", query(5))
        .await;
    assert_eq!(hits["points"].as_array().unwrap().len(), 5);
    // disabled: no limit applies
    server
        .ok(
            "PATCH",
            "/collections/strict",
            json!({"strict_mode_config": {"enabled": false}}),
        )
        .await;
    server
        .ok("POST", "/collections/strict/points/query", query(6))
        .await;
    server.ok("PUT", path, points(6..11)).await;
}

/// Fields Qdrant does not define are refused with their path; fields it defines are
/// honoured, or refused unless null; the tuning settings real clients send are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_are_refused_with_their_path() {
    let server = server();
    make_collection(&server, "docs", 4, 3).await;
    let cases: Vec<(&str, &str, Value, &[&str])> = vec![
        (
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 4, "distance": "Dot"}, "unknown": 1}),
            &["unknown"],
        ),
        (
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 4, "distance": "Dot"}, "hnsw_config": {"mm": 16}}),
            &["hnsw_config.mm"],
        ),
        (
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 4, "distance": "Dot"},
                   "optimizers_config": {"indexing_treshold": 1}}),
            &["optimizers_config.indexing_treshold"],
        ),
        (
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 4, "distance": "Dot"},
                   "quantization_config": {"scalar": {"type": "int8", "quantil": 0.9}}}),
            &["quantization_config.scalar.quantil"],
        ),
        (
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 4, "distance": "Dot"}, "sharding_method": "custom"}),
            &["sharding_method"],
        ),
        (
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 4, "distance": "Dot"}, "replication_factor": 2}),
            &["replication_factor"],
        ),
        (
            "PUT",
            "/collections/other",
            json!({"vectors": {"size": 4, "distance": "Dot"}, "init_from": {"collection": "docs"}}),
            &["init_from"],
        ),
        (
            "PATCH",
            "/collections/docs",
            json!({"optimizers_config": {"max_optimization_threads": 1}, "paramz": {}}),
            &["paramz"],
        ),
        (
            "PATCH",
            "/collections/docs",
            json!({"vectors": {"text": {"on_disk": true}}}),
            &["vectors", "text"],
        ),
        (
            "PUT",
            "/collections/docs/points?wait=true",
            json!({"points": [{"id": 9, "vector": [1, 0, 0, 0], "paylod": {}}]}),
            &["points[0].paylod"],
        ),
        (
            "PUT",
            "/collections/docs/points?wait=true",
            json!({"batch": {"ids": [9], "vectors": [[1, 0, 0, 0]], "payload": [{}]}}),
            &["batch.payload"],
        ),
        (
            "PUT",
            "/collections/docs/points?wait=true",
            json!({"points": [{"id": 9, "vector": [1, 0, 0, 0]}], "ordering": "strong"}),
            &["ordering"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": [1, 0, 0, 0], "limitt": 3}),
            &["limitt"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": [1, 0, 0, 0], "params": {"hnsw_eff": 3}}),
            &["params.hnsw_eff"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": [1, 0, 0, 0], "params": {"quantization": {"rescor": true}}}),
            &["params.quantization.rescor"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": {"nearest": [1, 0, 0, 0], "mmr": {"diversty": 0.5}}}),
            &["diversty"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": {"nearest": [1, 0, 0, 0], "mmr": {"diversity": 1.5}}}),
            &["query.mmr.diversity"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": {"recommend": {"positive": [1]}, "mmr": {}}}),
            &["mmr"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": [1, 0, 0, 0], "shard_key": "a"}),
            &["shard_key"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": [1, 0, 0, 0], "prefetch": [{"query": [1, 0, 0, 0], "limt": 2}]}),
            &["prefetch[0].limt"],
        ),
        (
            "POST",
            "/collections/docs/points/query/batch",
            json!({"searches": [{"query": [1, 0, 0, 0]}, {"query": [1, 0, 0, 0], "fiter": {}}]}),
            &["searches[1].fiter"],
        ),
        (
            "POST",
            "/collections/docs/points/search",
            json!({"vector": [1, 0, 0, 0], "limit": 1, "with_vectors": true}),
            &["with_vectors"],
        ),
        (
            "POST",
            "/collections/docs/points/search/batch",
            json!({"searches": [{"vector": [1, 0, 0, 0], "limit": 1, "top": 1}]}),
            &["searches[0].top"],
        ),
        (
            "POST",
            "/collections/docs/points/scroll",
            json!({"limit": 2, "filtr": {}}),
            &["filtr"],
        ),
        (
            "POST",
            "/collections/docs/points/scroll",
            json!({"order_by": "rank"}),
            &["order_by"],
        ),
        (
            "POST",
            "/collections/docs/points/count",
            json!({"exact": true, "approximate": false}),
            &["approximate"],
        ),
        (
            "POST",
            "/collections/docs/points",
            json!({"ids": [1], "with_vectors": true}),
            &["with_vectors"],
        ),
        (
            "POST",
            "/collections/docs/points/delete",
            json!({"points": [1], "wait": true}),
            &["wait"],
        ),
        (
            "POST",
            "/collections/docs/points/payload",
            json!({"payload": {"a": 1}, "points": [1], "merge": true}),
            &["merge"],
        ),
        (
            "POST",
            "/collections/docs/points/payload/delete",
            json!({"keys": ["a"], "points": [1], "all": true}),
            &["all"],
        ),
        (
            "POST",
            "/collections/docs/points/payload/clear",
            json!({"points": [1], "keys": ["a"]}),
            &["keys"],
        ),
        (
            "PUT",
            "/collections/docs/index",
            json!({"field_name": "group", "field_schema": "keyword", "field_type": "x"}),
            &["field_type"],
        ),
        (
            "POST",
            "/collections/docs/points/query",
            json!({"query": [1, 0, 0, 0], "with_vector": ["text"]}),
            &["with_vector", "text"],
        ),
    ];
    for (method, path, body, words) in cases {
        let reply = server.call(method, path, body.clone()).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{method} {path} {body}: {}",
            reply.body
        );
        let message = reply.body["status"]["error"].as_str().unwrap();
        for word in words {
            assert!(message.contains(word), "{word:?} not in {message:?}");
        }
    }
    assert_eq!(server.count("docs").await, 3);
    let exists = server
        .ok("GET", "/collections/other/exists", json!(null))
        .await;
    assert_eq!(exists["exists"], false);
    // The settings benchmark tools and clients send are accepted, and nulls everywhere.
    server
        .ok(
            "PUT",
            "/collections/tuned",
            json!({"vectors": {"size": 4, "distance": "Euclid", "on_disk": true,
                               "datatype": "float32", "hnsw_config": {"m": 32},
                               "quantization_config": null, "multivector_config": null},
                   "shard_number": 2, "sharding_method": "auto", "replication_factor": 1,
                   "write_consistency_factor": 1, "on_disk_payload": true,
                   "hnsw_config": {"m": 16, "ef_construct": 128, "full_scan_threshold": 10,
                                   "max_indexing_threads": 0, "on_disk": false,
                                   "payload_m": 16, "inline_storage": false},
                   "wal_config": {"wal_capacity_mb": 32, "wal_segments_ahead": 0},
                   "optimizers_config": {"deleted_threshold": 0.2,
                                         "vacuum_min_vector_number": 1000,
                                         "default_segment_number": 2,
                                         "max_segment_size": null, "memmap_threshold": 20000,
                                         "indexing_threshold": 20000, "flush_interval_sec": 5,
                                         "max_optimization_threads": "auto"},
                   "quantization_config": {"scalar": {"type": "int8", "quantile": 0.99,
                                                      "always_ram": true}},
                   "sparse_vectors": {}, "strict_mode_config": null, "metadata": null}),
        )
        .await;
    server
        .ok(
            "PATCH",
            "/collections/tuned",
            json!({"optimizers_config": {"indexing_threshold": 0},
                   "hnsw_config": {"ef_construct": 64},
                   "vectors": {"": {"on_disk": false}},
                   "params": {"replication_factor": 1, "on_disk_payload": false},
                   "quantization_config": "Disabled"}),
        )
        .await;
    server
        .ok(
            "PUT",
            "/collections/tuned/index",
            json!({"field_name": "pk", "field_schema": {"type": "integer", "lookup": true,
                                                         "range": true, "is_principal": false,
                                                         "on_disk": false}}),
        )
        .await;
    server
        .ok(
            "PUT",
            "/collections/tuned/points?wait=true",
            json!({"points": [{"id": 1, "vector": [1, 0, 0, 0], "payload": null}],
                   "shard_key": null, "update_filter": null, "update_mode": null}),
        )
        .await;
    let hits = server
        .ok(
            "POST",
            "/collections/tuned/points/query",
            json!({"query": {"nearest": [1, 0, 0, 0], "mmr": null}, "using": null,
                   "filter": null, "params": {"hnsw_ef": 32, "exact": false,
                                             "indexed_only": false,
                                             "quantization": {"ignore": false, "rescore": true,
                                                              "oversampling": 2.0},
                                             "acorn": {"enable": false}},
                   "limit": 3, "offset": null, "score_threshold": null,
                   "with_payload": {"include": ["pk"]}, "with_vector": [""],
                   "prefetch": null, "shard_key": null, "lookup_from": null}),
        )
        .await;
    assert_eq!(hits["points"][0]["id"], 1);
    assert_eq!(hits["points"][0]["vector"], json!([1.0, 0.0, 0.0, 0.0]));
    server
        .ok(
            "POST",
            "/collections/tuned/points/scroll",
            json!({"shard_key": null, "offset": null, "limit": 5, "filter": null,
                   "with_payload": {"exclude": ["a"]}, "with_vector": false,
                   "order_by": null}),
        )
        .await;
    server
        .ok(
            "POST",
            "/collections/tuned/points/count",
            json!({"shard_key": null, "filter": null, "exact": false}),
        )
        .await;
}

/// SagittaDB's storage extension: `sagitta.segment_kind`, `sagitta.page_cache_mb` and
/// `sagitta.partition_size` in a create are kept and shown in collection info, with what
/// the segments take in RAM and on disk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_storage_extension_is_kept_and_reported() {
    let server = server();
    server
        .ok(
            "PUT",
            "/collections/ondisk",
            json!({"vectors": {"size": 8, "distance": "Euclid"},
                   "sagitta": {"segment_kind": "disk", "page_cache_mb": 16, "partition_size": 250}}),
        )
        .await;
    let info = server.ok("GET", "/collections/ondisk", json!({})).await;
    assert_eq!(
        info["config"]["sagitta"],
        json!({"segment_kind": "disk", "page_cache_mb": 16, "partition_size": 250,
               "placement": "spread", "vectors_tier": "local-dram"})
    );
    let (node, far) = first_compute_node();
    assert_eq!(
        info["sagitta"],
        json!({"index_ram_bytes": 0, "ram_bytes_per_vector": null, "disk_bytes": 0,
               "stale_segments": 0,
               "placement": {"policy": "spread",
                             "shards": [{"shard": 0, "node": node, "far_node": far}],
                             "note": null,
                             "structures": {"graph": "none", "codes": "local-dram",
                                            "vectors": "disk", "write_buffer": "local-dram"}}}),
        "nothing sealed yet"
    );
    make_collection(&server, "inram", 4, 3).await;
    let info = server.ok("GET", "/collections/inram", json!({})).await;
    assert_eq!(
        info["config"]["sagitta"],
        json!({"segment_kind": "hnsw", "page_cache_mb": 64, "partition_size": 1000,
               "placement": "spread", "vectors_tier": "local-dram"}),
        "the default"
    );
    assert_eq!(
        info["sagitta"]["placement"]["structures"],
        json!({"graph": "local-dram", "codes": "local-dram", "vectors": "local-dram",
               "write_buffer": "local-dram"})
    );
    assert!(
        info["config"]["params"]["vectors"]["datatype"].is_null(),
        "float32, the default, is left out as Qdrant does"
    );
    assert!(
        info["config"]["params"]["vectors"]["on_disk"].is_null(),
        "vectors in RAM, the default, is left out as Qdrant does"
    );
    // Qdrant's `vectors.on_disk` is kept (HNSW segments' rows in records files)
    server
        .ok(
            "PUT",
            "/collections/rows_on_disk",
            json!({"vectors": {"size": 8, "distance": "Dot", "on_disk": true}}),
        )
        .await;
    let info = server
        .ok("GET", "/collections/rows_on_disk", json!({}))
        .await;
    assert_eq!(info["config"]["params"]["vectors"]["on_disk"], json!(true));
    assert_eq!(info["config"]["sagitta"]["segment_kind"], json!("hnsw"));
}

/// The node id of this machine's first compute node (where a spread shard 0 goes) and
/// its far tier (the nearest memory-only node, if any).
fn first_compute_node() -> (usize, Option<usize>) {
    let topology = sagitta_engine::topology::Topology::detect();
    let placed = sagitta_engine::machine::place(&topology, sagitta_engine::Placement::Spread, 1);
    (placed.nodes[0], placed.far_nodes[0])
}

/// `sagitta.placement` in a create: kept in the manifest, shown in collection info with
/// each shard's NUMA node (the engine's policy over this machine's topology), a node this
/// machine cannot run on falls back to spread and says so; telemetry reports the topology.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_placement_is_kept_reported_and_explained() {
    let server = server();
    let topology = sagitta_engine::topology::Topology::detect();
    let (node, far) = first_compute_node();
    let create = |name: &'static str, placement: String| {
        let server = &server;
        async move {
            server
                .ok(
                    "PUT",
                    &format!("/collections/{name}"),
                    json!({"vectors": {"size": 4, "distance": "Dot"}, "shard_number": 3,
                           "sagitta": {"placement": placement}}),
                )
                .await;
            server
                .ok("GET", &format!("/collections/{name}"), json!({}))
                .await
        }
    };
    let spread = create("spread", "spread".to_string()).await;
    let expected = sagitta_engine::machine::place(&topology, sagitta_engine::Placement::Spread, 3);
    let nodes: Vec<u64> = spread["sagitta"]["placement"]["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|shard| shard["node"].as_u64().unwrap())
        .collect();
    assert_eq!(
        nodes,
        expected.nodes.iter().map(|&n| n as u64).collect::<Vec<_>>()
    );
    let pinned = create("pinned", format!("node:{node}")).await;
    assert_eq!(
        pinned["config"]["sagitta"]["placement"],
        json!(format!("node:{node}"))
    );
    assert_eq!(
        pinned["sagitta"]["placement"]["shards"][2],
        json!({"shard": 2, "node": node, "far_node": far})
    );
    assert_eq!(pinned["sagitta"]["placement"]["note"], json!(null));
    // node 1023 is nowhere here: spread, with the reason
    let absent = create("absent", "node:1023".to_string()).await;
    assert_eq!(absent["config"]["sagitta"]["placement"], json!("node:1023"));
    let note = absent["sagitta"]["placement"]["note"].as_str().unwrap();
    assert!(note.contains("node 1023"), "{note}");
    // full vectors on the far tier: kept, and reported as far only where the machine has
    // a memory-only node (otherwise local DRAM, with the reason)
    server
        .ok(
            "PUT",
            "/collections/far",
            json!({"vectors": {"size": 4, "distance": "Dot"},
                   "sagitta": {"vectors_tier": "far"}}),
        )
        .await;
    let far_info = server.ok("GET", "/collections/far", json!({})).await;
    assert_eq!(far_info["config"]["sagitta"]["vectors_tier"], "far");
    let placement = &far_info["sagitta"]["placement"];
    assert_eq!(placement["shards"][0]["far_node"], json!(far));
    if far.is_some() {
        assert_eq!(placement["structures"]["vectors"], "far", "{placement}");
    } else {
        assert_eq!(
            placement["structures"]["vectors"], "local-dram",
            "{placement}"
        );
        let note = placement["vectors_tier_note"].as_str().unwrap();
        assert!(note.contains("no memory-only NUMA node"), "{note}");
    }
    assert_eq!(placement["structures"]["graph"], "local-dram");
    let telemetry = server.ok("GET", "/telemetry", json!(null)).await;
    let reported = &telemetry["app"]["topology"];
    assert_eq!(reported["cpus"], json!(topology.cpu_count()), "{reported}");
    assert_eq!(
        reported["nodes"].as_array().unwrap().len(),
        topology.nodes.len()
    );
    let listed = &telemetry["collections"]["collections"];
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["placement"]["shards"].is_array()),
        "{listed}"
    );
}

/// Qdrant's `vectors.datatype: float16`: every stored value is rounded to half precision,
/// in RAM segments and disk segments alike, and collection info says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn float16_collections_keep_half_precision_values() {
    let server = server();
    for (name, kind) in [("half_ram", "hnsw"), ("half_disk", "disk")] {
        server
            .ok(
                "PUT",
                &format!("/collections/{name}"),
                json!({"vectors": {"size": 3, "distance": "Euclid", "datatype": "float16"},
                       "sagitta": {"segment_kind": kind}}),
            )
            .await;
        let info = server
            .ok("GET", &format!("/collections/{name}"), json!({}))
            .await;
        assert_eq!(info["config"]["params"]["vectors"]["datatype"], "float16");
        server
            .ok(
                "PUT",
                &format!("/collections/{name}/points?wait=true"),
                json!({"points": [{"id": 1, "vector": [0.1, 1.0, 2.71]}]}),
            )
            .await;
        let point = server
            .ok("GET", &format!("/collections/{name}/points/1"), json!(null))
            .await;
        // 0.1 and 2.71 have no f16 of their own: the nearest halves are kept
        let expected: Vec<f32> = [0.1f32, 1.0, 2.71]
            .iter()
            .map(|value| half::f16::from_f32(*value).to_f32())
            .collect();
        #[allow(clippy::cast_possible_truncation)]
        let stored: Vec<f32> = point["vector"]
            .as_array()
            .expect("a dense vector")
            .iter()
            .map(|value| value.as_f64().expect("a number") as f32)
            .collect();
        assert_eq!(stored, expected, "{name}");
    }
}

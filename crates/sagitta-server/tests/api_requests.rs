//! Requests through the router: point ids parsed as Qdrant parses them, limits checked as
//! sent, scores that are always numbers, and payload selectors on nested and array paths.

mod support;

use axum::http::StatusCode;
use serde_json::{json, Value};
use support::{cosine, make_collection, server, vector, Reply};

/// Ids parse as Qdrant parses them: an unsigned integer, or UUID text in the `uuid`
/// crate's four forms; a sign, misplaced hyphens or other text are refused on every path
/// an id comes in by (issue 13 §2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn point_ids_parse_exactly_as_qdrant_does() {
    let server = server();
    make_collection(&server, "docs", 4, 3).await;
    let expect_bad = |reply: Reply, words: &[&str]| {
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let message = reply.body["status"]["error"].as_str().unwrap().to_string();
        for word in words {
            assert!(message.contains(word), "{word:?} not in {message:?}");
        }
    };
    let signed = [
        "+f9619ff8b86d011b42d00c04fc964ff",
        "+c56c793-69f3-4fbf-87e6-c4bf54c28c26",
    ];
    let malformed = [
        "5c56c793-69f3-4fbf-87e6-c4bf54c28c2g",
        "5c56c79-369f3-4fbf-87e6-c4bf54c28c26",
        "{5c56c79369f34fbf87e6c4bf54c28c26}",
        "12",
    ];
    for id in signed.iter().chain(&malformed) {
        let upsert = "/collections/docs/points?wait=true";
        expect_bad(
            server
                .call(
                    "PUT",
                    upsert,
                    json!({"points": [{"id": id, "vector": [1, 0, 0, 0]}]}),
                )
                .await,
            &["points[0].id"],
        );
        expect_bad(
            server
                .call(
                    "PUT",
                    upsert,
                    json!({"batch": {"ids": [id], "vectors": [[1, 0, 0, 0]]}}),
                )
                .await,
            &["batch.ids[0]"],
        );
        expect_bad(
            server
                .call("POST", "/collections/docs/points", json!({"ids": [1, id]}))
                .await,
            &["ids[1]"],
        );
        expect_bad(
            server
                .call(
                    "POST",
                    "/collections/docs/points/delete",
                    json!({"points": [id]}),
                )
                .await,
            &["points[0]"],
        );
        expect_bad(
            server
                .call(
                    "POST",
                    "/collections/docs/points/payload",
                    json!({"payload": {"a": 1}, "points": [id]}),
                )
                .await,
            &["points[0]"],
        );
        expect_bad(
            server
                .call(
                    "POST",
                    "/collections/docs/points/scroll",
                    json!({"offset": id}),
                )
                .await,
            &["offset"],
        );
        expect_bad(
            server
                .call(
                    "POST",
                    "/collections/docs/points/count",
                    json!({"filter": {"must": [{"has_id": [0, id]}]}}),
                )
                .await,
            &["has_id[1]"],
        );
        expect_bad(
            server
                .call(
                    "POST",
                    "/collections/docs/points/query",
                    json!({"query": id}),
                )
                .await,
            &["query"],
        );
    }
    // In a URL path an id is decimal digits or UUID text; `%2B1` is "+1".
    for path in [
        "%2B1",
        "+1",
        "-1",
        "1.0",
        "0x1",
        "%2Bf9619ff8b86d011b42d00c04fc964ff",
    ] {
        expect_bad(
            server
                .call(
                    "GET",
                    &format!("/collections/docs/points/{path}"),
                    json!(null),
                )
                .await,
            &["point id"],
        );
    }
    assert_eq!(server.count("docs").await, 3);
    // Every accepted UUID form names the same point, answered in the hyphenated form.
    let canonical = "5c56c793-69f3-4fbf-87e6-c4bf54c28c26";
    for (index, id) in [
        canonical,
        "5C56C793-69F3-4FBF-87E6-C4BF54C28C26",
        "5c56c79369f34fbf87e6c4bf54c28c26",
        "{5c56c793-69f3-4fbf-87e6-c4bf54c28c26}",
        "urn:uuid:5c56c793-69f3-4fbf-87e6-c4bf54c28c26",
    ]
    .into_iter()
    .enumerate()
    {
        server
            .ok(
                "PUT",
                "/collections/docs/points?wait=true",
                json!({"points": [{"id": id, "vector": [1, 0, 0, 0], "payload": {"form": index}}]}),
            )
            .await;
        let record = server
            .ok("POST", "/collections/docs/points", json!({"ids": [id]}))
            .await;
        assert_eq!(record[0]["id"], canonical);
        assert_eq!(record[0]["payload"]["form"], index);
        let one = server
            .ok(
                "GET",
                &format!("/collections/docs/points/{id}"),
                json!(null),
            )
            .await;
        assert_eq!(one["id"], canonical);
    }
    assert_eq!(server.count("docs").await, 4);
    let one = server
        .ok("GET", "/collections/docs/points/2", json!(null))
        .await;
    assert_eq!(one["id"], 2);
}

/// `limit` is checked as sent (issue 13 §3): 0 is refused everywhere a limit is taken,
/// the largest allowed value works for a query by id too, and huge values are named as
/// sent, never wrapped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_are_checked_as_sent() {
    let server = server();
    let dim = 4;
    make_collection(&server, "docs", dim, 30).await;
    let expect_limit = |reply: Reply, words: &[&str]| {
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
        let message = reply.body["status"]["error"].as_str().unwrap().to_string();
        for word in words {
            assert!(message.contains(word), "{word:?} not in {message:?}");
        }
    };
    let query = "/collections/docs/points/query";
    let by_id = server
        .ok("POST", query, json!({"query": 1, "limit": 10_000}))
        .await;
    assert_eq!(by_id["points"].as_array().unwrap().len(), 29);
    let by_id_nearest = server
        .ok(
            "POST",
            query,
            json!({"query": {"nearest": 1}, "limit": 10_000}),
        )
        .await;
    assert_eq!(by_id_nearest["points"].as_array().unwrap().len(), 29);
    expect_limit(
        server
            .send("POST", query, r#"{"query": 1, "limit": 10001}"#, None)
            .await,
        &["limit", "10001"],
    );
    expect_limit(
        server
            .send(
                "POST",
                query,
                r#"{"query": 1, "limit": 18446744073709551615}"#,
                None,
            )
            .await,
        &["limit", "18446744073709551615"],
    );
    let zero_limit: [(&str, Value, &str); 7] = [
        (query, json!({"query": 1, "limit": 0}), "limit"),
        (query, json!({"query": [1, 0, 0, 0], "limit": 0}), "limit"),
        (
            "/collections/docs/points/query/batch",
            json!({"searches": [{"query": [1, 0, 0, 0]}, {"query": 2, "limit": 0}]}),
            "searches[1].limit",
        ),
        (
            "/collections/docs/points/search",
            json!({"vector": [1, 0, 0, 0], "limit": 0}),
            "limit",
        ),
        (
            "/collections/docs/points/search/batch",
            json!({"searches": [{"vector": [1, 0, 0, 0], "limit": 0}]}),
            "searches[0].limit",
        ),
        (
            "/collections/docs/points/scroll",
            json!({"limit": 0}),
            "limit",
        ),
        (
            "/collections/docs/points/scroll",
            json!({"limit": 0, "filter": {"must": [{"has_id": [1]}]}}),
            "limit",
        ),
    ];
    for (path, body, field) in zero_limit {
        expect_limit(server.call("POST", path, body).await, &[field, "0"]);
    }
    // A query by id leaves its point out before `offset` and `limit` apply.
    let from = vector(7, dim);
    let mut expected: Vec<(u64, f32)> = (0..30)
        .filter(|i| *i != 7)
        .map(|i| (i, cosine(&from, &vector(i, dim))))
        .collect();
    expected.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    for offset in [0_usize, 1, 2, 5] {
        let page = server
            .ok(
                "POST",
                query,
                json!({"query": 7, "limit": 4, "offset": offset, "params": {"exact": true}}),
            )
            .await;
        let ids: Vec<u64> = page["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|hit| hit["id"].as_u64().unwrap())
            .collect();
        let wanted: Vec<u64> = expected[offset..offset + 4]
            .iter()
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(ids, wanted, "offset {offset}");
    }
}

/// A 200 never carries a `null` score (issue 12 §5): vectors whose components overflow
/// f32 arithmetic are refused at upsert with the limit named, or every score a plain
/// query returns is a finite number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scores_are_finite_numbers_or_the_vector_is_refused() {
    let server = server();
    for distance in ["Dot", "Euclid", "Cosine"] {
        for (index, magnitude) in [1e16_f64, 1e20, 3e38].into_iter().enumerate() {
            let name = format!("{}{index}", distance.to_lowercase());
            server
                .ok(
                    "PUT",
                    &format!("/collections/{name}"),
                    json!({"vectors": {"size": 2, "distance": distance}}),
                )
                .await;
            let upsert = server
                .call(
                    "PUT",
                    &format!("/collections/{name}/points?wait=true"),
                    json!({"points": [{"id": 1, "vector": [magnitude, magnitude]},
                                      {"id": 2, "vector": [1, 2]},
                                      {"id": 3, "vector": [-magnitude, magnitude]}]}),
                )
                .await;
            if upsert.status == StatusCode::BAD_REQUEST {
                let message = upsert.body["status"]["error"].as_str().unwrap();
                assert!(message.contains("vector"), "{message}");
                continue;
            }
            assert_eq!(upsert.status, StatusCode::OK, "{}", upsert.body);
            for body in [
                json!({"query": [1, 1]}),
                json!({"query": [0.5, -2]}),
                json!({"query": 2}),
                json!({"query": 1}),
            ] {
                let reply = server
                    .call(
                        "POST",
                        &format!("/collections/{name}/points/query"),
                        body.clone(),
                    )
                    .await;
                assert_eq!(
                    reply.status,
                    StatusCode::OK,
                    "{distance} {magnitude:e} {body}: {}",
                    reply.body
                );
                for hit in reply.body["result"]["points"].as_array().unwrap() {
                    assert!(
                        hit["score"].as_f64().is_some_and(f64::is_finite),
                        "{distance} {magnitude:e} {body}: {hit}"
                    );
                }
            }
        }
    }
}

/// `with_payload` keys and `include` / `exclude` selectors follow nested and `[]` array
/// paths as Qdrant's do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payload_selectors_follow_nested_and_array_paths() {
    let server = server();
    make_collection(&server, "docs", 2, 0).await;
    let payload = json!({"objs": [{"n": 1, "m": 2}, {"n": 3, "m": 4}, 5],
                         "x": {"y": 1, "z": [{"w": 1}, {"v": 2}]}, "k": 5});
    server
        .ok(
            "PUT",
            "/collections/docs/points?wait=true",
            json!({"points": [{"id": 1, "vector": [1, 0], "payload": payload}]}),
        )
        .await;
    let cases = [
        (
            json!(["objs[].n"]),
            json!({"objs": [{"n": 1}, {"n": 3}, 5]}),
        ),
        (
            json!({"include": ["objs[].n", "k"]}),
            json!({"objs": [{"n": 1}, {"n": 3}, 5], "k": 5}),
        ),
        (
            json!({"exclude": ["objs[].n"]}),
            json!({"objs": [{"m": 2}, {"m": 4}, 5], "x": {"y": 1, "z": [{"w": 1}, {"v": 2}]},
                   "k": 5}),
        ),
        (json!(["x.y"]), json!({"x": {"y": 1}})),
        (json!(["x.z[].w"]), json!({"x": {"z": [{"w": 1}, {}]}})),
        (
            json!({"exclude": ["x.y", "k", "objs[]"]}),
            json!({"objs": [], "x": {"z": [{"w": 1}, {"v": 2}]}}),
        ),
        (
            json!(["objs"]),
            json!({"objs": [{"n": 1, "m": 2}, {"n": 3, "m": 4}, 5]}),
        ),
        (json!(["nothing.here"]), json!({})),
        (json!({"exclude": []}), payload.clone()),
    ];
    for (selector, expected) in cases {
        let record = server
            .ok(
                "POST",
                "/collections/docs/points",
                json!({"ids": [1], "with_payload": selector}),
            )
            .await;
        assert_eq!(record[0]["payload"], expected, "retrieve {selector}");
        let page = server
            .ok(
                "POST",
                "/collections/docs/points/scroll",
                json!({"with_payload": selector}),
            )
            .await;
        assert_eq!(page["points"][0]["payload"], expected, "scroll {selector}");
        let hits = server
            .ok(
                "POST",
                "/collections/docs/points/query",
                json!({"query": [1, 0], "with_payload": selector}),
            )
            .await;
        assert_eq!(hits["points"][0]["payload"], expected, "query {selector}");
    }
}

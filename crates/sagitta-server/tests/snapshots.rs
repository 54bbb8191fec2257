//! Snapshots over HTTP: a collection snapshot is listed, downloaded, and recovered over
//! the collection (later writes undone, payload indexes and metadata back); a bad
//! location, checksum or file is refused without touching the collection; full snapshots
//! are made, listed and deleted; a shard snapshot restores its shard alone; uploads are
//! refused in Qdrant's envelope.

mod support;

use axum::http::StatusCode;
use serde_json::{json, Value};
use support::{make_collection, server, Server};

async fn message(server: &Server, method: &str, path: &str, body: Value) -> (StatusCode, String) {
    let reply = server.call(method, path, body).await;
    let text = reply.body["status"]["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (reply.status, text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_is_listed_downloaded_and_recovered() {
    let server = server();
    make_collection(&server, "docs", 4, 40).await;
    server
        .ok(
            "PUT",
            "/collections/docs/index?wait=true",
            json!({"field_name": "group", "field_schema": "keyword"}),
        )
        .await;
    server
        .ok(
            "PATCH",
            "/collections/docs",
            json!({"metadata": {"owner": "team a"}}),
        )
        .await;
    let made = server
        .ok("POST", "/collections/docs/snapshots?wait=true", json!(null))
        .await;
    let name = made["name"].as_str().unwrap().to_string();
    assert!(
        name.starts_with("docs-") && name.ends_with(".snapshot"),
        "{name}"
    );
    assert!(made["size"].as_u64().unwrap() > 0);
    assert_eq!(made["checksum"].as_str().unwrap().len(), 64);
    let listed = server
        .ok("GET", "/collections/docs/snapshots", json!(null))
        .await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["name"], name.as_str());
    let download = server
        .send(
            "GET",
            &format!("/collections/docs/snapshots/{name}"),
            "",
            None,
        )
        .await;
    assert_eq!(download.status, StatusCode::OK);
    // writes after the snapshot: one point more, one less, an index dropped
    server
        .ok(
            "PUT",
            "/collections/docs/points?wait=true",
            json!({"points": [{"id": 1000, "vector": [1, 2, 3, 4]}]}),
        )
        .await;
    server
        .ok(
            "POST",
            "/collections/docs/points/delete?wait=true",
            json!({"points": [0]}),
        )
        .await;
    server
        .ok(
            "DELETE",
            "/collections/docs/index/group?wait=true",
            json!(null),
        )
        .await;
    assert_eq!(server.count("docs").await, 40);
    // refused, the collection untouched
    let bad = [
        (
            json!({"location": "http://elsewhere/x.snapshot"}),
            "location",
        ),
        (json!({"location": "file:///etc/passwd"}), "location"),
        (json!({"location": "nope.snapshot"}), "nope.snapshot"),
        (json!({"location": name, "checksum": "00"}), "checksum"),
        (json!({"location": name, "priority": "first"}), "priority"),
    ];
    for (body, named) in bad {
        let (status, text) =
            message(&server, "PUT", "/collections/docs/snapshots/recover", body).await;
        assert!(status.is_client_error(), "{named}: {status}");
        assert!(text.contains(named), "{named}: {text}");
    }
    assert_eq!(server.count("docs").await, 40);
    let recovered = server
        .ok(
            "PUT",
            "/collections/docs/snapshots/recover?wait=true",
            json!({"location": name, "priority": "snapshot", "checksum": made["checksum"]}),
        )
        .await;
    assert_eq!(recovered, true);
    assert_eq!(server.count("docs").await, 40);
    let point = server
        .ok("GET", "/collections/docs/points/0", json!(null))
        .await;
    assert_eq!(point["id"], 0);
    let gone = server
        .call("GET", "/collections/docs/points/1000", json!(null))
        .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    let info = server.ok("GET", "/collections/docs", json!(null)).await;
    assert_eq!(info["payload_schema"]["group"]["data_type"], "keyword");
    assert_eq!(info["config"]["metadata"], json!({"owner": "team a"}));
    // deleted, it is gone
    server
        .ok(
            "DELETE",
            &format!("/collections/docs/snapshots/{name}?wait=true"),
            json!(null),
        )
        .await;
    let listed = server
        .ok("GET", "/collections/docs/snapshots", json!(null))
        .await;
    assert_eq!(listed, json!([]));
    let (status, _) = message(
        &server,
        "DELETE",
        &format!("/collections/docs/snapshots/{name}"),
        json!(null),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_snapshot_leaves_the_collection_as_it_was() {
    let server = server();
    make_collection(&server, "docs", 4, 10).await;
    let made = server
        .ok("POST", "/collections/docs/snapshots", json!(null))
        .await;
    let name = made["name"].as_str().unwrap();
    let path = server
        .state
        .config
        .data_dir
        .join("snapshots")
        .join("docs")
        .join(name);
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    server
        .ok(
            "PUT",
            "/collections/docs/points?wait=true",
            json!({"points": [{"id": 77, "vector": [1, 0, 0, 0]}]}),
        )
        .await;
    let (status, text) = message(
        &server,
        "PUT",
        "/collections/docs/snapshots/recover",
        json!({ "location": format!("file://{}", path.display()) }),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("snapshot"), "{text}");
    assert_eq!(
        server.count("docs").await,
        11,
        "the collection is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_snapshots_are_made_listed_and_deleted() {
    let server = server();
    make_collection(&server, "a", 4, 5).await;
    make_collection(&server, "b", 4, 7).await;
    let made = server.ok("POST", "/snapshots?wait=true", json!(null)).await;
    let name = made["name"].as_str().unwrap().to_string();
    let listed = server.ok("GET", "/snapshots", json!(null)).await;
    assert_eq!(listed.as_array().unwrap().len(), 1);
    let download = server
        .send("GET", &format!("/snapshots/{name}"), "", None)
        .await;
    assert_eq!(download.status, StatusCode::OK);
    server
        .ok("DELETE", &format!("/snapshots/{name}"), json!(null))
        .await;
    assert_eq!(server.ok("GET", "/snapshots", json!(null)).await, json!([]));
    let (status, text) = message(&server, "GET", "/snapshots/..%2Fx.snapshot", json!(null)).await;
    assert!(status.is_client_error(), "{status}");
    assert!(text.contains("snapshot"), "{text}");
    let (status, text) = message(
        &server,
        "POST",
        "/collections/a/snapshots/upload",
        json!(null),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_IMPLEMENTED);
    assert!(text.contains("upload"), "{text}");
}

/// The shard of point `id` in a collection of `shards` shards.
fn shard_of(id: u64, shards: u64) -> u64 {
    sagitta_engine::PointId::Number(id).routing_hash() % shards
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_snapshot_restores_that_shard_alone() {
    let server = server();
    server
        .ok(
            "PUT",
            "/collections/split",
            json!({"vectors": {"size": 2, "distance": "Dot"}, "shard_number": 2}),
        )
        .await;
    let points: Vec<Value> = (0..40)
        .map(|i| json!({"id": i, "vector": [1.0, i as f32], "payload": {"i": i}}))
        .collect();
    server
        .ok(
            "PUT",
            "/collections/split/points?wait=true",
            json!({ "points": points }),
        )
        .await;
    let made = server
        .ok("POST", "/collections/split/shards/1/snapshots", json!(null))
        .await;
    let name = made["name"].as_str().unwrap().to_string();
    let listed = |shard: u64| format!("/collections/split/shards/{shard}/snapshots");
    assert_eq!(
        server.ok("GET", &listed(1), json!(null)).await[0]["name"],
        name.as_str()
    );
    assert_eq!(server.ok("GET", &listed(0), json!(null)).await, json!([]));
    let collection_snapshots = server
        .ok("GET", "/collections/split/snapshots", json!(null))
        .await;
    assert_eq!(
        collection_snapshots,
        json!([]),
        "a shard's are listed apart"
    );
    let download = server
        .send("GET", &format!("{}/{name}", listed(1)), "", None)
        .await;
    assert_eq!(download.status, StatusCode::OK);
    // after the snapshot: every point deleted, five new ones
    server
        .ok(
            "POST",
            "/collections/split/points/delete?wait=true",
            json!({"filter": {}}),
        )
        .await;
    let later: Vec<Value> = (100..105)
        .map(|i| json!({"id": i, "vector": [0.0, 1.0]}))
        .collect();
    server
        .ok(
            "PUT",
            "/collections/split/points?wait=true",
            json!({ "points": later }),
        )
        .await;
    // refused, nothing touched: another shard's file, a collection recovery from a shard
    // snapshot, a shard the collection does not have
    let (status, text) = message(
        &server,
        "PUT",
        "/collections/split/shards/0/snapshots/recover",
        json!({"location": format!("file://{}", server.state.config.data_dir.join("snapshots/split/shards/1").join(&name).display())}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("not of shard 0"), "{text}");
    let (status, text) = message(
        &server,
        "PUT",
        "/collections/split/snapshots/recover",
        json!({"location": format!("file://{}", server.state.config.data_dir.join("snapshots/split/shards/1").join(&name).display())}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(text.contains("shard snapshot"), "{text}");
    let (status, _) = message(&server, "GET", &listed(5), json!(null)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(server.count("split").await, 5);
    let recovered = server
        .ok(
            "PUT",
            &format!("{}/recover?wait=true", listed(1)),
            json!({"location": name, "checksum": made["checksum"]}),
        )
        .await;
    assert_eq!(recovered, true);
    // shard 1 as it was at the snapshot; shard 0 as it is now
    let mut expected: Vec<u64> = (0..40)
        .filter(|i| shard_of(*i, 2) == 1)
        .chain((100..105).filter(|i| shard_of(*i, 2) == 0))
        .collect();
    expected.sort_unstable();
    let page = server
        .ok(
            "POST",
            "/collections/split/points/scroll",
            json!({"limit": 100, "with_payload": true}),
        )
        .await;
    let ids: Vec<u64> = page["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|point| point["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, expected);
    let restored = expected.iter().find(|id| **id < 40).unwrap();
    let point = server
        .ok(
            "GET",
            &format!("/collections/split/points/{restored}"),
            json!(null),
        )
        .await;
    assert_eq!(point["payload"]["i"], *restored);
    server
        .ok("DELETE", &format!("{}/{name}", listed(1)), json!(null))
        .await;
    assert_eq!(server.ok("GET", &listed(1), json!(null)).await, json!([]));
}

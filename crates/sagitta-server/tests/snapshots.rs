//! Snapshots over HTTP: a collection snapshot is listed, downloaded, and recovered over
//! the collection (later writes undone, payload indexes and metadata back); a bad
//! location, checksum or file is refused without touching the collection; full snapshots
//! are made, listed and deleted; uploads are refused in Qdrant's envelope.

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

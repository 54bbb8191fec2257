//! Collection aliases over REST, against what Qdrant (and qdrant-client's local mode)
//! does: created, re-pointed, renamed and deleted by `POST /collections/aliases`, listed
//! by `GET /aliases` and `GET /collections/{c}/aliases`, answered to by every collection
//! endpoint, removed with their collection, refused where they would clash with a
//! collection, and kept across a restart.

mod support;

use std::sync::Arc;

use axum::http::StatusCode;
use sagitta_server::{router, AppState, ServerConfig};
use serde_json::{json, Value};
use support::{make_collection, Server};

fn create(alias: &str, collection: &str) -> Value {
    json!({"create_alias": {"collection_name": collection, "alias_name": alias}})
}

async fn change(server: &Server, actions: Value) -> support::Reply {
    server
        .call(
            "POST",
            "/collections/aliases",
            json!({ "actions": actions }),
        )
        .await
}

async fn listed(server: &Server, path: &str) -> Vec<(String, String)> {
    let result = server.ok("GET", path, json!({})).await;
    let mut pairs: Vec<(String, String)> = result["aliases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            let name = |key: &str| a[key].as_str().unwrap().to_string();
            (name("alias_name"), name("collection_name"))
        })
        .collect();
    pairs.sort();
    pairs
}

fn pair(alias: &str, collection: &str) -> (String, String) {
    (alias.to_string(), collection.to_string())
}

#[tokio::test]
async fn aliases_are_created_used_renamed_dropped_and_kept_across_a_restart() {
    let directory = tempfile::tempdir().unwrap();
    let open = || {
        let state = Arc::new(
            AppState::open(ServerConfig {
                data_dir: directory.path().to_path_buf(),
                ..ServerConfig::default()
            })
            .unwrap(),
        );
        Server {
            app: router(Arc::clone(&state)),
            state,
            _directory: tempfile::tempdir().unwrap(),
        }
    };
    let server = open();
    make_collection(&server, "docs", 8, 40).await;
    make_collection(&server, "docs_v2", 8, 10).await;
    let reply = change(
        &server,
        json!([create("live", "docs"), create("old", "docs")]),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["result"], true);
    assert_eq!(
        listed(&server, "/aliases").await,
        [pair("live", "docs"), pair("old", "docs")]
    );

    // every collection endpoint answers to the alias
    assert_eq!(server.count("live").await, 40);
    let info = server.ok("GET", "/collections/live", json!({})).await;
    assert_eq!(info["points_count"], 40);
    let exists = server
        .ok("GET", "/collections/live/exists", json!({}))
        .await;
    assert_eq!(exists["exists"], true);
    server
        .ok(
            "PUT",
            "/collections/live/points?wait=true",
            json!({"points": [{"id": 1000, "vector": vec![0.5f32; 8]}]}),
        )
        .await;
    assert_eq!(
        server.count("docs").await,
        41,
        "the write reached the collection"
    );

    // re-pointing (a create of an existing alias), renaming and deleting, in one request,
    // applied in order
    let actions = json!([
        create("live", "docs_v2"),
        {"rename_alias": {"old_alias_name": "old", "new_alias_name": "previous"}},
        {"delete_alias": {"alias_name": "never-made"}},
    ]);
    assert_eq!(change(&server, actions).await.status, StatusCode::OK);
    assert_eq!(server.count("live").await, 10);
    assert_eq!(
        listed(&server, "/collections/docs/aliases").await,
        [pair("previous", "docs")]
    );
    assert_eq!(
        listed(&server, "/collections/previous/aliases").await,
        [pair("previous", "docs")],
        "asked through an alias, the collection's aliases"
    );

    // refusals leave every alias as it was, and name what is wrong
    let before = listed(&server, "/aliases").await;
    for (actions, status, words) in [
        (
            json!([{"delete_alias": {"alias_name": "live"}}, create("x", "missing")]),
            StatusCode::NOT_FOUND,
            "Collection `missing` doesn't exist",
        ),
        (
            json!([create("docs_v2", "docs")]),
            StatusCode::BAD_REQUEST,
            "Collection `docs_v2` already exists",
        ),
        (
            json!([{"rename_alias": {"old_alias_name": "nope", "new_alias_name": "y"}}]),
            StatusCode::NOT_FOUND,
            "Alias `nope` does not exist",
        ),
        (
            json!([create("bad name", "docs")]),
            StatusCode::BAD_REQUEST,
            "alias_name",
        ),
    ] {
        let reply = change(&server, actions).await;
        assert_eq!(reply.status, status, "{}", reply.body);
        let error = reply.body["status"]["error"].as_str().unwrap();
        assert!(error.contains(words), "{error}");
    }
    assert_eq!(listed(&server, "/aliases").await, before);
    let reply = server
        .call(
            "POST",
            "/collections/aliases",
            json!({"actions": [{"make_alias": {}}]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);

    // a collection cannot take an alias's name
    let reply = server
        .call(
            "PUT",
            "/collections/live",
            json!({"vectors": {"size": 8, "distance": "Dot"}}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    let error = reply.body["status"]["error"].as_str().unwrap();
    assert!(
        error.contains("Alias with the same name already exists"),
        "{error}"
    );
    let reply = server
        .call("GET", "/collections/nothing/aliases", json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);

    // the aliases survive a restart
    drop(server);
    let server = open();
    assert_eq!(
        listed(&server, "/aliases").await,
        [pair("live", "docs_v2"), pair("previous", "docs")]
    );
    assert_eq!(server.count("previous").await, 41);

    // dropping a collection drops its aliases, durably
    server.ok("DELETE", "/collections/docs", json!({})).await;
    assert_eq!(listed(&server, "/aliases").await, [pair("live", "docs_v2")]);
    let reply = server
        .call("POST", "/collections/previous/points/count", json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    drop(server);
    let server = open();
    assert_eq!(listed(&server, "/aliases").await, [pair("live", "docs_v2")]);
}

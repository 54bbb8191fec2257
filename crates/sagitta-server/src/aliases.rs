//! Collection aliases, as Qdrant serves them: `POST /collections/aliases` (a list of
//! create, delete and rename actions, applied all or nothing), `GET /aliases` and
//! `GET /collections/{name}/aliases`. Every collection endpoint also answers to an alias
//! (`Database::collection` resolves it).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::response::Response;
use sagitta_engine::{AliasAction, EngineError};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::body::JsonBody;
use crate::collections::{blocking, Path};
use crate::error::{ApiError, ApiResult};
use crate::response::ok;
use crate::SharedState;

#[derive(Deserialize)]
pub struct ChangeAliasesRequest {
    actions: Vec<AliasOperation>,
}

#[derive(Deserialize)]
enum AliasOperation {
    #[serde(rename = "create_alias")]
    Create(CreateAlias),
    #[serde(rename = "delete_alias")]
    Delete(DeleteAlias),
    #[serde(rename = "rename_alias")]
    Rename(RenameAlias),
}

#[derive(Deserialize)]
struct CreateAlias {
    collection_name: String,
    alias_name: String,
}

#[derive(Deserialize)]
struct DeleteAlias {
    alias_name: String,
}

#[derive(Deserialize)]
struct RenameAlias {
    old_alias_name: String,
    new_alias_name: String,
}

impl From<AliasOperation> for AliasAction {
    fn from(operation: AliasOperation) -> AliasAction {
        match operation {
            AliasOperation::Create(create) => AliasAction::Create {
                alias: create.alias_name,
                collection: create.collection_name,
            },
            AliasOperation::Delete(delete) => AliasAction::Delete {
                alias: delete.alias_name,
            },
            AliasOperation::Rename(rename) => AliasAction::Rename {
                from: rename.old_alias_name,
                to: rename.new_alias_name,
            },
        }
    }
}

pub async fn change(
    State(state): State<SharedState>,
    JsonBody(request): JsonBody<ChangeAliasesRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let actions: Vec<AliasAction> = request.actions.into_iter().map(Into::into).collect();
    let database = Arc::clone(&state.database);
    blocking(move || {
        database
            .update_aliases(&actions)
            .map_err(|error| match &error {
                // the collection an alias was to point at
                EngineError::CollectionNotFound { path } => ApiError::collection_not_found(path),
                _ => ApiError::from_engine(error, ""),
            })
    })
    .await?;
    Ok(ok(true, started))
}

fn descriptions(aliases: impl Iterator<Item = (String, String)>) -> Value {
    let aliases: Vec<Value> = aliases
        .map(|(alias, collection)| json!({"alias_name": alias, "collection_name": collection}))
        .collect();
    json!({ "aliases": aliases })
}

pub async fn list(State(state): State<SharedState>) -> Response {
    let started = Instant::now();
    ok(descriptions(state.database.aliases().into_iter()), started)
}

pub async fn of_collection(
    State(state): State<SharedState>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let Some(target) = state.database.resolve(&name) else {
        return Err(ApiError::collection_not_found(&name));
    };
    let aliases = state.database.aliases().into_iter();
    let of_target = aliases.filter(|(_, collection)| *collection == target);
    Ok(ok(descriptions(of_target), started))
}

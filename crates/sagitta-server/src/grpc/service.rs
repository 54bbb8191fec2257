//! `qdrant.Qdrant` (health check), `qdrant.Collections` and `qdrant.Snapshots`.

use axum::http::Method;
use serde_json::{json, Value};
use tonic::{Request, Response, Status};

use super::api;
use super::api::collections_server::Collections;
use super::api::qdrant_server::Qdrant;
use super::api::snapshots_server::Snapshots;
use super::collections as convert;
use super::reply::{self, Reply};
use super::rest::{collection, escape, Answer, Call, Rest};

type Done<T> = Result<Response<T>, Status>;

pub struct Service {
    pub rest: Rest,
}

fn done(answer: &Answer) -> api::CollectionOperationResponse {
    api::CollectionOperationResponse {
        result: answer.result.as_bool().unwrap_or(true),
        time: answer.time,
    }
}

fn snapshots(answer: &Answer) -> Reply<api::ListSnapshotsResponse> {
    let list = answer
        .result
        .as_array()
        .ok_or_else(|| Status::internal("no snapshot list in the answer"))?;
    Ok(api::ListSnapshotsResponse {
        snapshot_descriptions: list
            .iter()
            .map(reply::snapshot)
            .collect::<Reply<Vec<_>>>()?,
        time: answer.time,
    })
}

fn created(answer: &Answer) -> Reply<api::CreateSnapshotResponse> {
    Ok(api::CreateSnapshotResponse {
        snapshot_description: Some(reply::snapshot(&answer.result)?),
        time: answer.time,
    })
}

#[tonic::async_trait]
impl Qdrant for Service {
    /// Open to every caller, as REST's `/` is: the server's name and version.
    async fn health_check(
        &self,
        _: Request<api::HealthCheckRequest>,
    ) -> Done<api::HealthCheckReply> {
        Ok(Response::new(api::HealthCheckReply {
            title: "sagittadb - a Qdrant-compatible vector database".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            commit: None,
        }))
    }
}

#[tonic::async_trait]
impl Collections for Service {
    async fn get(
        &self,
        request: Request<api::GetCollectionInfoRequest>,
    ) -> Done<api::GetCollectionInfoResponse> {
        let (metadata, _, r) = request.into_parts();
        let answer = self
            .rest
            .run(
                &metadata,
                Call::new(Method::GET, collection(&r.collection_name, "")),
            )
            .await?;
        Ok(Response::new(api::GetCollectionInfoResponse {
            result: Some(convert::info(&answer.result)?),
            time: answer.time,
        }))
    }

    async fn list(
        &self,
        request: Request<api::ListCollectionsRequest>,
    ) -> Done<api::ListCollectionsResponse> {
        let (metadata, _, _) = request.into_parts();
        let answer = self
            .rest
            .run(&metadata, Call::new(Method::GET, "/collections".into()))
            .await?;
        let names = answer.result["collections"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        Ok(Response::new(api::ListCollectionsResponse {
            collections: names
                .iter()
                .filter_map(|c| c["name"].as_str())
                .map(|name| api::CollectionDescription {
                    name: name.to_string(),
                })
                .collect(),
            time: answer.time,
        }))
    }

    async fn create(
        &self,
        request: Request<api::CreateCollection>,
    ) -> Done<api::CollectionOperationResponse> {
        let (metadata, _, r) = request.into_parts();
        let call = Call::new(Method::PUT, collection(&r.collection_name, ""))
            .query("timeout", r.timeout)
            .json(&convert::create(&r)?);
        Ok(Response::new(done(&self.rest.run(&metadata, call).await?)))
    }

    async fn update(
        &self,
        request: Request<api::UpdateCollection>,
    ) -> Done<api::CollectionOperationResponse> {
        let (metadata, _, r) = request.into_parts();
        let call = Call::new(Method::PATCH, collection(&r.collection_name, ""))
            .query("timeout", r.timeout)
            .json(&convert::update(&r)?);
        Ok(Response::new(done(&self.rest.run(&metadata, call).await?)))
    }

    async fn delete(
        &self,
        request: Request<api::DeleteCollection>,
    ) -> Done<api::CollectionOperationResponse> {
        let (metadata, _, r) = request.into_parts();
        let call = Call::new(Method::DELETE, collection(&r.collection_name, ""))
            .query("timeout", r.timeout);
        Ok(Response::new(done(&self.rest.run(&metadata, call).await?)))
    }

    async fn update_aliases(
        &self,
        request: Request<api::ChangeAliases>,
    ) -> Done<api::CollectionOperationResponse> {
        use api::alias_operations::Action;
        let (metadata, _, r) = request.into_parts();
        let actions = r
            .actions
            .iter()
            .map(|a| match &a.action {
                Some(Action::CreateAlias(c)) => {
                    Ok(json!({"create_alias": {"collection_name": c.collection_name, "alias_name": c.alias_name}}))
                }
                Some(Action::RenameAlias(c)) => Ok(
                    json!({"rename_alias": {"old_alias_name": c.old_alias_name, "new_alias_name": c.new_alias_name}}),
                ),
                Some(Action::DeleteAlias(c)) => Ok(json!({"delete_alias": {"alias_name": c.alias_name}})),
                None => Err(Status::invalid_argument("actions: an alias action of no kind")),
            })
            .collect::<Result<Vec<Value>, Status>>()?;
        let call = Call::new(Method::POST, "/collections/aliases".into())
            .query("timeout", r.timeout)
            .json(&json!({"actions": actions}));
        Ok(Response::new(done(&self.rest.run(&metadata, call).await?)))
    }

    async fn list_collection_aliases(
        &self,
        request: Request<api::ListCollectionAliasesRequest>,
    ) -> Done<api::ListAliasesResponse> {
        let (metadata, _, r) = request.into_parts();
        let call = Call::new(Method::GET, collection(&r.collection_name, "/aliases"));
        let answer = self.rest.run(&metadata, call).await?;
        Ok(Response::new(api::ListAliasesResponse {
            aliases: reply::aliases(&answer.result)?,
            time: answer.time,
        }))
    }

    async fn list_aliases(
        &self,
        request: Request<api::ListAliasesRequest>,
    ) -> Done<api::ListAliasesResponse> {
        let (metadata, _, _) = request.into_parts();
        let answer = self
            .rest
            .run(&metadata, Call::new(Method::GET, "/aliases".into()))
            .await?;
        Ok(Response::new(api::ListAliasesResponse {
            aliases: reply::aliases(&answer.result)?,
            time: answer.time,
        }))
    }

    async fn collection_exists(
        &self,
        request: Request<api::CollectionExistsRequest>,
    ) -> Done<api::CollectionExistsResponse> {
        let (metadata, _, r) = request.into_parts();
        let answer = self
            .rest
            .run(
                &metadata,
                Call::new(Method::GET, collection(&r.collection_name, "/exists")),
            )
            .await?;
        let exists = answer.result["exists"]
            .as_bool()
            .ok_or_else(|| Status::internal("no `exists` in the answer"))?;
        Ok(Response::new(api::CollectionExistsResponse {
            result: Some(api::CollectionExists { exists }),
            time: answer.time,
        }))
    }
}

#[tonic::async_trait]
impl Snapshots for Service {
    async fn create(
        &self,
        request: Request<api::CreateSnapshotRequest>,
    ) -> Done<api::CreateSnapshotResponse> {
        let (metadata, _, r) = request.into_parts();
        let call = Call::new(Method::POST, collection(&r.collection_name, "/snapshots"))
            .query("wait", Some(true));
        Ok(Response::new(created(
            &self.rest.run(&metadata, call).await?,
        )?))
    }

    async fn list(
        &self,
        request: Request<api::ListSnapshotsRequest>,
    ) -> Done<api::ListSnapshotsResponse> {
        let (metadata, _, r) = request.into_parts();
        let call = Call::new(Method::GET, collection(&r.collection_name, "/snapshots"));
        Ok(Response::new(snapshots(
            &self.rest.run(&metadata, call).await?,
        )?))
    }

    async fn delete(
        &self,
        request: Request<api::DeleteSnapshotRequest>,
    ) -> Done<api::DeleteSnapshotResponse> {
        let (metadata, _, r) = request.into_parts();
        let path = collection(
            &r.collection_name,
            &format!("/snapshots/{}", escape(&r.snapshot_name)),
        );
        let answer = self
            .rest
            .run(
                &metadata,
                Call::new(Method::DELETE, path).query("wait", Some(true)),
            )
            .await?;
        Ok(Response::new(api::DeleteSnapshotResponse {
            time: answer.time,
        }))
    }

    async fn create_full(
        &self,
        request: Request<api::CreateFullSnapshotRequest>,
    ) -> Done<api::CreateSnapshotResponse> {
        let (metadata, _, _) = request.into_parts();
        let call = Call::new(Method::POST, "/snapshots".into()).query("wait", Some(true));
        Ok(Response::new(created(
            &self.rest.run(&metadata, call).await?,
        )?))
    }

    async fn list_full(
        &self,
        request: Request<api::ListFullSnapshotsRequest>,
    ) -> Done<api::ListSnapshotsResponse> {
        let (metadata, _, _) = request.into_parts();
        let call = Call::new(Method::GET, "/snapshots".into());
        Ok(Response::new(snapshots(
            &self.rest.run(&metadata, call).await?,
        )?))
    }

    async fn delete_full(
        &self,
        request: Request<api::DeleteFullSnapshotRequest>,
    ) -> Done<api::DeleteSnapshotResponse> {
        let (metadata, _, r) = request.into_parts();
        let path = format!("/snapshots/{}", escape(&r.snapshot_name));
        let answer = self
            .rest
            .run(
                &metadata,
                Call::new(Method::DELETE, path).query("wait", Some(true)),
            )
            .await?;
        Ok(Response::new(api::DeleteSnapshotResponse {
            time: answer.time,
        }))
    }
}

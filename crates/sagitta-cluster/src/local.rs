//! A rank's own database as the job's service reaches it ([`Local`]): query and probe
//! batches searched in its collections, writes applied, collections made and dropped,
//! and rank 0's calls answered ([`Database::answer`]). On rank 0 the database is linked,
//! and only its probes are served here (searched among rank 0's own points).

use std::sync::Arc;

use sagitta_engine::codec::Operation;
use sagitta_engine::{Collection, Database, Distance};

use crate::batch::QueryBatch;
use crate::jobs::Local;
use crate::probe::{decode_call, encode_answer, ProbeBatch};
use crate::topk::Hit;
use crate::writes::Admin;

/// This rank's database.
pub struct DatabaseLocal(pub Arc<Database>);

impl DatabaseLocal {
    fn collection(&self, name: &str) -> Result<Arc<Collection>, String> {
        self.0.collection(name).map_err(|error| error.to_string())
    }
}

/// `operation` applied to `collection` as a write from a client is.
pub fn apply(collection: &Collection, operation: Operation, wait: bool) -> Result<(), String> {
    match operation {
        Operation::Upsert(points) => collection.upsert(points, wait),
        Operation::Delete(ids) => collection.delete(&ids, wait),
        Operation::SetPayload { ids, payload } => collection.set_payload(&ids, &payload, wait),
        Operation::OverwritePayload { ids, payload } => {
            collection.overwrite_payload(&ids, &payload, wait)
        }
        Operation::DeletePayloadKeys { ids, keys } => {
            collection.delete_payload_keys(&ids, &keys, wait)
        }
    }
    .map_err(|error| error.to_string())
}

impl Local for DatabaseLocal {
    fn search(&self, batch: &QueryBatch) -> Result<(Vec<Vec<Hit>>, Distance), String> {
        let collection = self.collection(&batch.collection)?;
        if collection.is_linked() {
            // its searches reach every rank: this rank's part is a probe batch's
            return Err("a linked collection is searched by probes".to_string());
        }
        let lists = batch
            .search(&collection)
            .map_err(|error| error.to_string())?
            .lists;
        Ok((lists, collection.config().distance))
    }

    fn check(&self, collection: &str, operation: &Operation) -> Result<(), String> {
        let collection = self.collection(collection)?;
        if let Operation::Upsert(points) = operation {
            for point in points {
                collection
                    .check_point(point)
                    .map_err(|error| error.to_string())?;
            }
        }
        Ok(())
    }

    fn apply(&self, collection: &str, operation: Operation, wait: bool) -> Result<(), String> {
        apply(&*self.collection(collection)?, operation, wait)
    }

    fn admin(&self, admin: &Admin) -> Result<(), String> {
        match admin {
            Admin::Create {
                name,
                config,
                spaces,
            } => self
                .0
                .create_collection_with_spaces(name, *config, spaces.clone())
                .map(drop),
            Admin::Drop { name } => self.0.drop_collection(name),
        }
        .map_err(|error| error.to_string())
    }

    fn probe(&self, batch: &ProbeBatch) -> Result<Vec<Vec<Hit>>, String> {
        let collection = self.collection(&batch.collection)?;
        Ok(batch.search(&collection)?.lists)
    }

    fn call(&self, request: &[u8]) -> Vec<u8> {
        let answer = decode_call(request)
            .and_then(|call| self.0.answer(call).map_err(|error| error.to_string()));
        encode_answer(&answer)
    }
}

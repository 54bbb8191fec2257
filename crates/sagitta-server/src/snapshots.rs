//! Snapshots, as Qdrant's REST API has them: a collection's (`/collections/{c}/snapshots`:
//! create, list, download, delete, recover) and the whole storage's (`/snapshots`: create,
//! list, download, delete).
//!
//! A collection snapshot is the engine's snapshot file (docs/format.md, "Collection
//! snapshot file"), kept as `<data dir>/snapshots/<collection>/<name>.snapshot`: written to
//! a temporary name, fsynced, then renamed, so a listed snapshot is always whole. Every
//! write acknowledged before the request is in it. A full snapshot,
//! `<data dir>/snapshots/<name>.snapshot`, holds every collection's snapshot: magic
//! `SGFULL01`, then per collection `name_length u32 | name | snapshot` (a collection
//! snapshot ends with its end frame), streamed collection by collection.
//!
//! Recovery (`PUT /collections/{c}/snapshots/recover`, `{"location": ..}`) reads a snapshot
//! of this server: its name, or a `file://` URL inside the snapshots directory (a URL
//! elsewhere or over the network is refused; `checksum`, when given, must be the file's
//! SHA-256). An existing collection is dropped only after the whole file is checked, then
//! rebuilt from the snapshot; a bad file met while building leaves no collection.
//!
//! Shard snapshots (`/collections/{c}/shards/{shard}/snapshots`: create, list, download,
//! delete, recover) are the same file of one shard's points, with a shard frame after the
//! manifest, kept in `<data dir>/snapshots/<collection>/shards/<shard>/`. Recovering one
//! checks the whole file against the collection first (configuration, shard, every point
//! routed to that shard), then replaces that shard's points with the snapshot's. Uploads
//! and the recovery of a full snapshot are not served.

use std::fs::{self, File};
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, Uri};
use axum::response::Response;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::body::{wait_flag, JsonBody};
use crate::collections::{blocking, collection, Path as ApiPath};
use crate::error::{ApiError, ApiResult};
use crate::response::ok;
use crate::SharedState;

const SUFFIX: &str = ".snapshot";
const FULL_MAGIC: &[u8; 8] = b"SGFULL01";

/// Makes names taken within one millisecond distinct.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

fn root(state: &SharedState) -> PathBuf {
    state.config.data_dir.join("snapshots")
}

fn io_error(what: &str, error: &std::io::Error) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
        format!("Service internal error: {what}: {error}"),
    )
}

/// `name` if it is a snapshot file name (no path, the `.snapshot` suffix).
fn checked_name(name: &str) -> ApiResult<&str> {
    let plain = !name.contains(['/', '\\']) && !name.starts_with('.');
    if plain && name.ends_with(SUFFIX) && name.len() > SUFFIX.len() {
        Ok(name)
    } else {
        Err(ApiError::bad_request(format!(
            "Wrong input: `snapshot_name` = {name:?} is not a snapshot name"
        )))
    }
}

/// UTC time as Qdrant writes `creation_time`: `YYYY-MM-DDTHH:MM:SS`, without a zone.
fn utc(time: SystemTime) -> String {
    let seconds = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut text = sagitta_storage::utc::utc_timestamp(seconds);
    text.pop(); // the `Z`
    text
}

/// A snapshot file's description: name, creation time, size and SHA-256.
fn describe(path: &Path) -> ApiResult<Value> {
    let metadata = fs::metadata(path).map_err(|e| io_error("reading a snapshot", &e))?;
    let checksum = sha256_hex(path)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let created = metadata.modified().unwrap_or(UNIX_EPOCH);
    Ok(
        json!({"name": name, "creation_time": utc(created), "size": metadata.len(),
              "checksum": checksum}),
    )
}

/// The SHA-256 of the file at `path`, in lowercase hex (as Qdrant's `checksum`).
fn sha256_hex(path: &Path) -> ApiResult<String> {
    let mut hasher = Sha256::new();
    std::io::copy(&mut open_snapshot(path)?, &mut hasher)
        .map_err(|e| io_error("reading a snapshot", &e))?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Writes a snapshot file `name` in `directory` through `write`: a temporary file,
/// fsynced, renamed into place, the directory fsynced.
fn publish(
    directory: &Path,
    name: &str,
    write: impl FnOnce(&mut dyn Write) -> ApiResult<()>,
) -> ApiResult<PathBuf> {
    fs::create_dir_all(directory).map_err(|e| io_error("creating the snapshots directory", &e))?;
    let temporary = directory.join(format!(".{name}.partial"));
    let file = File::create(&temporary).map_err(|e| io_error("writing a snapshot", &e))?;
    let mut out = BufWriter::new(file);
    let written = write(&mut out).and_then(|()| {
        let file = out
            .into_inner()
            .map_err(|e| io_error("writing a snapshot", e.error()))?;
        file.sync_all()
            .map_err(|e| io_error("syncing a snapshot", &e))
    });
    if let Err(error) = written {
        let _ = fs::remove_file(&temporary);
        return Err(error);
    }
    let path = directory.join(name);
    fs::rename(&temporary, &path).map_err(|e| io_error("publishing a snapshot", &e))?;
    File::open(directory)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| io_error("syncing the snapshots directory", &e))?;
    Ok(path)
}

fn new_name(prefix: &str) -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{millis}-{sequence}{SUFFIX}")
}

/// The snapshots in `directory` (files only), by name.
fn listing(directory: &Path) -> ApiResult<Vec<Value>> {
    let entries = match fs::read_dir(directory) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(io_error("listing snapshots", &error)),
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .filter(|path| {
            path.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| checked_name(n).is_ok())
        })
        .collect();
    paths.sort();
    paths.iter().map(|path| describe(path)).collect()
}

pub async fn create(
    State(state): State<SharedState>,
    ApiPath(name): ApiPath<String>,
    uri: Uri,
) -> ApiResult<Response> {
    let started = Instant::now();
    wait_flag(uri.query())?;
    let target = collection(&state, &name)?;
    let directory = root(&state).join(&name);
    let description = blocking(move || {
        let path = publish(&directory, &new_name(&name), |out| {
            target
                .write_snapshot(out)
                .map(|_| ())
                .map_err(|error| ApiError::from_engine(error, &name))
        })?;
        describe(&path)
    })
    .await?;
    Ok(ok(description, started))
}

pub async fn list(
    State(state): State<SharedState>,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Response> {
    let started = Instant::now();
    collection(&state, &name)?;
    let directory = root(&state).join(&name);
    let found = blocking(move || listing(&directory)).await?;
    Ok(ok(found, started))
}

/// The file of snapshot `file` in `directory`, or 404.
fn existing(directory: &Path, file: &str) -> ApiResult<PathBuf> {
    let path = directory.join(checked_name(file)?);
    if path.is_file() {
        Ok(path)
    } else {
        Err(ApiError::not_found(format!(
            "Not found: Snapshot {file} not found"
        )))
    }
}

/// Deletes snapshot `file` of `directory` (404 when there is none).
fn remove_snapshot(directory: &Path, file: &str) -> ApiResult<()> {
    let path = existing(directory, file)?;
    fs::remove_file(&path).map_err(|e| io_error("deleting a snapshot", &e))
}

fn download_file(path: &Path) -> ApiResult<Response> {
    let bytes = fs::read(path).map_err(|e| io_error("reading a snapshot", &e))?;
    Response::builder()
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .body(Body::from(bytes))
        .map_err(|error| ApiError::bad_request(error.to_string()))
}

pub async fn download(
    State(state): State<SharedState>,
    ApiPath((name, file)): ApiPath<(String, String)>,
) -> ApiResult<Response> {
    collection(&state, &name)?;
    let path = existing(&root(&state).join(&name), &file)?;
    blocking(move || download_file(&path)).await
}

pub async fn delete(
    State(state): State<SharedState>,
    ApiPath((name, file)): ApiPath<(String, String)>,
    uri: Uri,
) -> ApiResult<Response> {
    let started = Instant::now();
    wait_flag(uri.query())?;
    collection(&state, &name)?;
    remove_snapshot(&root(&state).join(&name), &file)?;
    Ok(ok(true, started))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecoverRequest {
    location: String,
    #[serde(default)]
    priority: Option<String>,
    #[serde(default)]
    checksum: Option<String>,
    #[serde(default)]
    api_key: Option<String>,
}

/// The snapshot file `location` names: a snapshot of this server's snapshots directory,
/// by name (a file of `named_in`) or `file://` URL.
fn located(root: &Path, named_in: &Path, location: &str) -> ApiResult<PathBuf> {
    let refuse = |reason: &str| {
        ApiError::bad_request(format!("Wrong input: `location` = {location:?}: {reason}"))
    };
    let Some(path) = location.strip_prefix("file://") else {
        if location.contains("://") {
            return Err(refuse(
                "only file:// URLs of this server's snapshots are read",
            ));
        }
        return existing(named_in, location);
    };
    let path = PathBuf::from(path);
    let canonical = path
        .canonicalize()
        .map_err(|_| refuse("no such snapshot file"))?;
    let snapshots = root
        .canonicalize()
        .map_err(|_| refuse("no such snapshot file"))?;
    if !canonical.starts_with(&snapshots) || !canonical.is_file() {
        return Err(refuse(
            "a snapshot must lie in the server's snapshots directory",
        ));
    }
    Ok(canonical)
}

fn open_snapshot(path: &Path) -> ApiResult<BufReader<File>> {
    File::open(path)
        .map(BufReader::new)
        .map_err(|e| io_error("reading a snapshot", &e))
}

impl RecoverRequest {
    /// The fields SagittaDB cannot honour refused by name; the snapshot file `location`
    /// names (a name is a file of `named_in`).
    fn checked(&self, root: &Path, named_in: &Path) -> ApiResult<PathBuf> {
        if self.api_key.is_some() {
            return Err(ApiError::bad_request(
                "Wrong input: `api_key` is for downloading a snapshot from another server, \
                 which SagittaDB does not do",
            ));
        }
        if let Some(priority) = self.priority.as_deref() {
            if !matches!(priority, "snapshot" | "replica" | "no_sync") {
                return Err(ApiError::bad_request(format!(
                    "Wrong input: `priority` = {priority:?}: expected snapshot, replica or \
                     no_sync"
                )));
            }
        }
        located(root, named_in, &self.location)
    }

    /// An error unless the file at `path` has the `checksum` asked for (if any).
    fn check_sum(&self, path: &Path) -> ApiResult<()> {
        let Some(expected) = &self.checksum else {
            return Ok(());
        };
        let actual = sha256_hex(path)?;
        if actual.eq_ignore_ascii_case(expected) {
            return Ok(());
        }
        Err(ApiError::bad_request(format!(
            "Wrong input: `checksum`: the snapshot's SHA-256 is {actual}"
        )))
    }
}

pub async fn recover(
    State(state): State<SharedState>,
    ApiPath(name): ApiPath<String>,
    uri: Uri,
    JsonBody(request): JsonBody<RecoverRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    wait_flag(uri.query())?;
    let path = request.checked(&root(&state), &root(&state).join(&name))?;
    let database = std::sync::Arc::clone(&state.database);
    let name = blocking(move || {
        request.check_sum(&path)?;
        let engine = |error| ApiError::from_engine(error, &name);
        if database.collection(&name).is_ok() {
            // the collection goes only for a snapshot known to be whole (a recovery into
            // a new name drops what it built on a bad file by itself)
            sagitta_engine::collection::snapshot::verify_snapshot(&mut open_snapshot(&path)?)
                .map_err(engine)?;
            database.drop_collection(&name).map_err(engine)?;
        }
        database
            .recover_collection(&name, &mut open_snapshot(&path)?)
            .map_err(engine)?;
        Ok(name)
    })
    .await?;
    state.echoed.lock().remove(&name);
    state.rate_limits.forget(&name);
    Ok(ok(true, started))
}

pub async fn create_full(State(state): State<SharedState>, uri: Uri) -> ApiResult<Response> {
    let started = Instant::now();
    wait_flag(uri.query())?;
    let directory = root(&state);
    let database = std::sync::Arc::clone(&state.database);
    let description = blocking(move || {
        let path = publish(&directory, &new_name("full-snapshot"), |out| {
            out.write_all(FULL_MAGIC)
                .map_err(|e| io_error("writing a snapshot", &e))?;
            for name in database.list() {
                let target = database
                    .collection(&name)
                    .map_err(|error| ApiError::from_engine(error, &name))?;
                let length = u32::try_from(name.len()).expect("a short name");
                out.write_all(&length.to_le_bytes())
                    .and_then(|()| out.write_all(name.as_bytes()))
                    .map_err(|e| io_error("writing a snapshot", &e))?;
                // a collection snapshot ends with its own end frame: streamed as it is read
                target
                    .write_snapshot(out)
                    .map_err(|error| ApiError::from_engine(error, &name))?;
            }
            Ok(())
        })?;
        describe(&path)
    })
    .await?;
    Ok(ok(description, started))
}

pub async fn list_full(State(state): State<SharedState>) -> ApiResult<Response> {
    let started = Instant::now();
    let directory = root(&state);
    let found = blocking(move || listing(&directory)).await?;
    Ok(ok(found, started))
}

pub async fn download_full(
    State(state): State<SharedState>,
    ApiPath(file): ApiPath<String>,
) -> ApiResult<Response> {
    let path = existing(&root(&state), &file)?;
    blocking(move || download_file(&path)).await
}

pub async fn delete_full(
    State(state): State<SharedState>,
    ApiPath(file): ApiPath<String>,
    uri: Uri,
) -> ApiResult<Response> {
    let started = Instant::now();
    wait_flag(uri.query())?;
    remove_snapshot(&root(&state), &file)?;
    Ok(ok(true, started))
}

/// `<data dir>/snapshots/<collection>/shards/<shard>`, once `shard` is known to be one of
/// the collection's.
fn shard_directory(state: &SharedState, name: &str, shard: usize) -> ApiResult<PathBuf> {
    collection(state, name)?
        .check_shard(shard)
        .map_err(|error| ApiError::not_found(format!("Not found: {error}")))?;
    Ok(root(state)
        .join(name)
        .join("shards")
        .join(shard.to_string()))
}

pub async fn create_shard(
    State(state): State<SharedState>,
    ApiPath((name, shard)): ApiPath<(String, usize)>,
    uri: Uri,
) -> ApiResult<Response> {
    let started = Instant::now();
    wait_flag(uri.query())?;
    let directory = shard_directory(&state, &name, shard)?;
    let target = collection(&state, &name)?;
    let description = blocking(move || {
        let path = publish(
            &directory,
            &new_name(&format!("{name}-shard-{shard}")),
            |out| {
                target
                    .write_shard_snapshot(shard, out)
                    .map(|_| ())
                    .map_err(|error| ApiError::from_engine(error, &name))
            },
        )?;
        describe(&path)
    })
    .await?;
    Ok(ok(description, started))
}

pub async fn list_shard(
    State(state): State<SharedState>,
    ApiPath((name, shard)): ApiPath<(String, usize)>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let directory = shard_directory(&state, &name, shard)?;
    let found = blocking(move || listing(&directory)).await?;
    Ok(ok(found, started))
}

pub async fn download_shard(
    State(state): State<SharedState>,
    ApiPath((name, shard, file)): ApiPath<(String, usize, String)>,
) -> ApiResult<Response> {
    let path = existing(&shard_directory(&state, &name, shard)?, &file)?;
    blocking(move || download_file(&path)).await
}

pub async fn delete_shard(
    State(state): State<SharedState>,
    ApiPath((name, shard, file)): ApiPath<(String, usize, String)>,
    uri: Uri,
) -> ApiResult<Response> {
    let started = Instant::now();
    wait_flag(uri.query())?;
    remove_snapshot(&shard_directory(&state, &name, shard)?, &file)?;
    Ok(ok(true, started))
}

pub async fn recover_shard(
    State(state): State<SharedState>,
    ApiPath((name, shard)): ApiPath<(String, usize)>,
    uri: Uri,
    JsonBody(request): JsonBody<RecoverRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    wait_flag(uri.query())?;
    let path = request.checked(&root(&state), &shard_directory(&state, &name, shard)?)?;
    let target = collection(&state, &name)?;
    blocking(move || {
        request.check_sum(&path)?;
        let engine = |error| ApiError::from_engine(error, &name);
        // the shard's points are replaced only from a file known to be whole and fitting
        target
            .verify_shard_snapshot(shard, &mut open_snapshot(&path)?)
            .map_err(engine)?;
        // no other write to the collection between the replacement's upserts and its
        // deletes (a point written meanwhile would be taken for a stale one)
        let _order = crate::points::exclusive(crate::points::write_order(&name));
        target
            .recover_shard(shard, &mut open_snapshot(&path)?)
            .map_err(engine)
    })
    .await?;
    Ok(ok(true, started))
}

//! Collection settings kept in the engine's settings document (recorded in the collection
//! manifest, so they survive restarts): Qdrant's collection `metadata` — any JSON object,
//! merged key by key by `PATCH` — and `strict_mode_config`, whose limits are enforced:
//!
//! - `max_query_limit`: a search or scroll asking for more hits is refused (400);
//! - `upsert_max_batchsize`: an upsert of more points is refused (400);
//! - `max_points_count`: an upsert into a collection already holding that many points is
//!   refused (400);
//! - `search_max_hnsw_ef`, `search_allow_exact`: searches with a larger beam, or an exact
//!   search when not allowed, are refused (400);
//! - `read_rate_limit` (searches per minute: a batch costs one per search) and
//!   `write_rate_limit` (points written per minute): token buckets refilled continuously;
//!   a request over the limit is answered 429 with `Retry-After`, and a request costing
//!   more than a whole minute's budget is refused outright.
//!
//! Limits apply while `enabled` is true. Fields of Qdrant's `StrictModeConfig` that are
//! not enforced are refused with 400 naming them. Rate buckets live in memory (a restart
//! starts them full).

use std::collections::HashMap;
use std::time::Instant;

use parking_lot::Mutex;
use sagitta_engine::Collection;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// `strict_mode_config`: the limits SagittaDB enforces (see the module).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct StrictMode {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_query_limit: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upsert_max_batchsize: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_points_count: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_max_hnsw_ef: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_allow_exact: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_rate_limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_rate_limit: Option<u32>,
}

impl StrictMode {
    /// `self` with every field `update` sets replaced.
    fn merged(&self, update: StrictMode) -> StrictMode {
        StrictMode {
            enabled: update.enabled.or(self.enabled),
            max_query_limit: update.max_query_limit.or(self.max_query_limit),
            upsert_max_batchsize: update.upsert_max_batchsize.or(self.upsert_max_batchsize),
            max_points_count: update.max_points_count.or(self.max_points_count),
            search_max_hnsw_ef: update.search_max_hnsw_ef.or(self.search_max_hnsw_ef),
            search_allow_exact: update.search_allow_exact.or(self.search_allow_exact),
            read_rate_limit: update.read_rate_limit.or(self.read_rate_limit),
            write_rate_limit: update.write_rate_limit.or(self.write_rate_limit),
        }
    }
}

/// The settings document: what `metadata` and `strict_mode_config` hold.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Settings {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict_mode_config: Option<StrictMode>,
    /// The hints given with each payload index (see [`crate::indexes`]), by field.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub index_hints: Map<String, Value>,
}

impl Settings {
    /// The collection's settings (none when its document is empty).
    pub fn of(collection: &Collection) -> Settings {
        let text = collection.settings();
        if text.is_empty() {
            return Settings::default();
        }
        // the document is only ever written from a `Settings`
        serde_json::from_str(&text).unwrap_or_default()
    }

    /// `self` changed by a request: metadata keys merged, strict-mode fields replaced.
    pub fn updated(
        &self,
        metadata: Option<Map<String, Value>>,
        strict: Option<StrictMode>,
    ) -> Settings {
        let metadata = match (self.metadata.clone(), metadata) {
            (Some(mut current), Some(update)) => {
                current.extend(update);
                Some(current)
            }
            (current, update) => update.or(current),
        };
        let strict_mode_config = match (&self.strict_mode_config, strict) {
            (Some(current), Some(update)) => Some(current.merged(update)),
            (current, update) => update.or(*current),
        };
        Settings {
            metadata,
            strict_mode_config,
            index_hints: self.index_hints.clone(),
        }
    }

    /// `self` with the hints of the index on `field` replaced (`None`: removed).
    pub fn with_index_hints(&self, field: &str, hints: Option<Map<String, Value>>) -> Settings {
        let mut updated = self.clone();
        match hints {
            Some(hints) => updated
                .index_hints
                .insert(field.to_string(), Value::Object(hints)),
            None => updated.index_hints.remove(field),
        };
        updated
    }

    /// The hints recorded for the index on `field`.
    pub fn index_hints(&self, field: &str) -> Option<&Map<String, Value>> {
        self.index_hints.get(field).and_then(Value::as_object)
    }

    /// Records the settings in the collection's manifest (durably).
    pub fn store(
        &self,
        collection: &Collection,
        fs: &dyn sagitta_storage::fs::FileSystem,
        name: &str,
    ) -> ApiResult<()> {
        let text = if *self == Settings::default() {
            String::new()
        } else {
            serde_json::to_string(self).expect("settings serialize")
        };
        collection
            .set_settings(fs, &text)
            .map_err(|error| ApiError::from_engine(error, name))
    }

    /// The strict mode in force, if enabled.
    pub fn strict(&self) -> Option<&StrictMode> {
        self.strict_mode_config
            .as_ref()
            .filter(|strict| strict.enabled == Some(true))
    }
}

/// A token bucket: `capacity` tokens per minute, refilled continuously.
#[derive(Debug)]
struct Bucket {
    capacity: f64,
    tokens: f64,
    refilled: Instant,
}

impl Bucket {
    fn new(capacity: u32) -> Bucket {
        Bucket {
            capacity: f64::from(capacity),
            tokens: f64::from(capacity),
            refilled: Instant::now(),
        }
    }

    /// Takes `cost` tokens, or says how many seconds until they are there (`None` when
    /// the bucket can never hold them).
    fn take(&mut self, cost: f64) -> Result<(), Option<u64>> {
        let now = Instant::now();
        let per_second = self.capacity / 60.0;
        let elapsed = now.duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * per_second).min(self.capacity);
        self.refilled = now;
        if cost > self.capacity {
            return Err(None);
        }
        if cost <= self.tokens {
            self.tokens -= cost;
            return Ok(());
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let wait = ((cost - self.tokens) / per_second).ceil().max(1.0) as u64;
        Err(Some(wait))
    }
}

/// A collection's read and write buckets, each with the limit it was made for.
#[derive(Debug, Default)]
struct Budgets {
    read: Option<(u32, Bucket)>,
    write: Option<(u32, Bucket)>,
}

/// The rate buckets of each collection (by its own name), rebuilt when its limits change.
#[derive(Debug, Default)]
pub struct RateLimits {
    buckets: Mutex<HashMap<String, Budgets>>,
}

/// Which limit a request spends.
#[derive(Clone, Copy)]
pub(crate) enum Spend {
    Read,
    Write,
}

impl RateLimits {
    /// Forgets a collection's buckets (dropped, or its limits changed).
    pub fn forget(&self, name: &str) {
        self.buckets.lock().remove(name);
    }

    /// Spends `cost` of collection `name`'s read or write budget under `strict`.
    pub(crate) fn spend(
        &self,
        name: &str,
        strict: &StrictMode,
        spend: Spend,
        cost: usize,
    ) -> ApiResult<()> {
        let (limit, kind) = match spend {
            Spend::Read => (strict.read_rate_limit, "Read"),
            Spend::Write => (strict.write_rate_limit, "Write"),
        };
        let Some(limit) = limit else {
            return Ok(());
        };
        let mut buckets = self.buckets.lock();
        let budgets = buckets.entry(name.to_string()).or_default();
        let slot = match spend {
            Spend::Read => &mut budgets.read,
            Spend::Write => &mut budgets.write,
        };
        if slot.as_ref().is_none_or(|(known, _)| *known != limit) {
            *slot = Some((limit, Bucket::new(limit)));
        }
        #[allow(clippy::cast_precision_loss)]
        let cost = cost as f64;
        let (_, bucket) = slot.as_mut().expect("set above");
        match bucket.take(cost) {
            Ok(()) => Ok(()),
            // no wait would let it through: 429 without Retry-After, as Qdrant answers
            Err(None) => Err(ApiError::new(
                axum::http::StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "{kind} rate limit exceeded: the request costs {cost} of a limit of \
                     {limit} per minute; split it into smaller requests"
                ),
            )),
            Err(Some(seconds)) => Err(ApiError::too_many_requests(
                format!("{kind} rate limit exceeded: {limit} per minute; retry after {seconds} s"),
                seconds,
            )),
        }
    }
}

/// Refuses a search or scroll asking for more than `max_query_limit` hits, a beam over
/// `search_max_hnsw_ef` or an exact search when not allowed.
pub(crate) fn check_query(
    strict: &StrictMode,
    limit: usize,
    hnsw_ef: Option<usize>,
    exact: bool,
) -> ApiResult<()> {
    let forbidden =
        |what: String| ApiError::bad_request(format!("Forbidden: {what} (strict mode)"));
    if let Some(max) = strict.max_query_limit.filter(|max| limit > *max) {
        return Err(forbidden(format!(
            "Limit exceeded {limit} > {max} for \"limit\""
        )));
    }
    if let (Some(max), Some(ef)) = (strict.search_max_hnsw_ef, hnsw_ef) {
        if ef > max {
            return Err(forbidden(format!(
                "Limit exceeded {ef} > {max} for \"hnsw_ef\""
            )));
        }
    }
    if exact && strict.search_allow_exact == Some(false) {
        return Err(forbidden("exact search is not allowed".to_string()));
    }
    Ok(())
}

/// Refuses an upsert of `points` points over `upsert_max_batchsize`, or into a collection
/// holding `max_points_count` points already (`stored` is counted only then).
pub(crate) fn check_upsert(
    strict: &StrictMode,
    points: usize,
    stored: impl FnOnce() -> ApiResult<usize>,
) -> ApiResult<()> {
    if let Some(max) = strict.upsert_max_batchsize.filter(|max| points > *max) {
        return Err(ApiError::bad_request(format!(
            "Forbidden: Limit exceeded {points} > {max} for \"upsert_max_batchsize\" (strict mode)"
        )));
    }
    let Some(max) = strict.max_points_count else {
        return Ok(());
    };
    let stored = stored()?;
    if stored >= max {
        return Err(ApiError::bad_request(format!(
            "Forbidden: Max points count exceeded: the collection holds {stored}, the limit is \
             {max} (strict mode)"
        )));
    }
    Ok(())
}

/// The key of a collection's rate buckets: its own name (an alias spends its
/// collection's budget).
fn budget_key(state: &AppState, name: &str) -> String {
    state
        .database
        .resolve(name)
        .unwrap_or_else(|| name.to_string())
}

/// Admits searches or scrolls of collection `name` under its strict mode, if enabled:
/// each `(limit, hnsw_ef, exact)` checked, one read each spent.
pub(crate) fn admit_reads(
    state: &AppState,
    target: &Collection,
    name: &str,
    queries: &[(usize, Option<usize>, bool)],
) -> ApiResult<()> {
    let settings = Settings::of(target);
    let Some(strict) = settings.strict() else {
        return Ok(());
    };
    for (limit, hnsw_ef, exact) in queries {
        check_query(strict, *limit, *hnsw_ef, *exact)?;
    }
    let key = budget_key(state, name);
    state
        .rate_limits
        .spend(&key, strict, Spend::Read, queries.len())
}

/// Admits an upsert of `points` points into collection `name` under its strict mode, if
/// enabled.
pub(crate) fn admit_upsert(
    state: &AppState,
    target: &Collection,
    name: &str,
    points: usize,
) -> ApiResult<()> {
    let settings = Settings::of(target);
    let Some(strict) = settings.strict() else {
        return Ok(());
    };
    check_upsert(strict, points, || {
        target
            .count(None)
            .map_err(|error| ApiError::from_engine(error, name))
    })?;
    let key = budget_key(state, name);
    state.rate_limits.spend(&key, strict, Spend::Write, points)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_refuses_past_its_budget_and_what_it_can_never_hold() {
        let mut bucket = Bucket::new(3);
        assert!(bucket.take(2.0).is_ok());
        assert!(bucket.take(1.0).is_ok());
        // empty: a point is back after 20 s
        assert_eq!(bucket.take(1.0), Err(Some(20)));
        assert_eq!(bucket.take(4.0), Err(None));
    }

    #[test]
    fn updates_merge_metadata_keys_and_replace_strict_fields() {
        let object = |value: Value| value.as_object().cloned();
        let first = Settings::default().updated(
            object(serde_json::json!({"a": 1, "b": 2})),
            Some(StrictMode {
                enabled: Some(true),
                max_query_limit: Some(5),
                ..StrictMode::default()
            }),
        );
        let second = first.updated(
            object(serde_json::json!({"b": 3})),
            Some(StrictMode {
                max_points_count: Some(10),
                ..StrictMode::default()
            }),
        );
        assert_eq!(second.metadata, object(serde_json::json!({"a": 1, "b": 3})));
        let strict = second.strict().expect("enabled");
        assert_eq!(
            (strict.max_query_limit, strict.max_points_count),
            (Some(5), Some(10))
        );
        assert!(check_query(strict, 6, None, false).is_err());
        assert!(check_query(strict, 5, None, false).is_ok());
        assert!(check_upsert(strict, 1, || Ok(10)).is_err());
        assert!(check_upsert(strict, 1, || Ok(9)).is_ok());
        let off = second.updated(
            None,
            Some(StrictMode {
                enabled: Some(false),
                ..StrictMode::default()
            }),
        );
        assert!(off.strict().is_none());
    }
}

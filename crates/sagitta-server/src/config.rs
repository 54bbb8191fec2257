//! Server settings: documented defaults, overridden by a TOML file, then by environment
//! variables, then by command-line flags (the CLI applies the flags last).

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Default data directory, relative to the working directory.
pub const DEFAULT_DATA_DIR: &str = "sagitta-data";
pub const DEFAULT_HOST: &str = "127.0.0.1";
pub const DEFAULT_PORT: u16 = 6333;
/// The gRPC API's port (Qdrant's); 0 turns the gRPC API off.
pub const DEFAULT_GRPC_PORT: u16 = 6334;
/// Largest request body: 32 MiB (about 10,000 768-d vectors as JSON text).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 32 << 20;
/// Most points (or ids, or queries) in one request.
pub const DEFAULT_MAX_BATCH_POINTS: usize = 10_000;
/// Deepest nesting of JSON arrays and objects accepted in a request body.
pub const DEFAULT_MAX_JSON_DEPTH: usize = 64;
/// Writes that may be in flight at once; beyond it a write is answered 429 + Retry-After.
pub const DEFAULT_MAX_PENDING_WRITES: usize = 256;
/// Bytes of all request bodies (and gRPC messages) being received at once: 256 MiB (eight
/// bodies at the 32 MiB limit); beyond it a request is answered 503 + Retry-After.
pub const DEFAULT_MAX_INFLIGHT_REQUEST_BYTES: usize = 256 << 20;
/// Open client connections; at the limit the stalest idle or stalled connection of the
/// address holding the most is closed to admit a new one. Never more than three quarters
/// of the process's open-file limit, whatever this says.
pub const DEFAULT_MAX_CONNECTIONS: usize = 16_384;
/// Open connections from one client address (an IPv6 /64 counts as one address); beyond
/// it the address's own stalest idle or stalled connection is closed.
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 4_096;
/// Seconds from a connection's first byte (or its opening) to the end of a request head.
pub const DEFAULT_HEADER_READ_TIMEOUT_SECS: u64 = 10;
/// Seconds a request body may take beyond what `min_body_bytes_per_sec` allows for the
/// bytes received so far; also the longest a response write may stall.
pub const DEFAULT_BODY_READ_TIMEOUT_SECS: u64 = 30;
/// Each this many body bytes received extend the body's time limit by one second.
pub const DEFAULT_MIN_BODY_BYTES_PER_SEC: u64 = 4_096;
/// Seconds a keep-alive connection may sit idle between requests.
pub const DEFAULT_KEEP_ALIVE_TIMEOUT_SECS: u64 = 60;

#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on.
    pub host: String,
    pub port: u16,
    /// Port of the gRPC API (Qdrant's services); 0: no gRPC API.
    pub grpc_port: u16,
    /// Database directory (created if missing).
    pub data_dir: PathBuf,
    /// Directories on other devices that disk segments' records files spread over, besides
    /// `data_dir` (the database must be reopened with the same ones, in order).
    pub stripe_dirs: Vec<PathBuf>,
    /// Key that may read and write (`api-key` header or `Authorization: Bearer`). With no
    /// key configured at all, every request is allowed.
    pub api_key: Option<String>,
    /// Key that may only read (searches, scrolls, counts, collection info).
    pub read_only_api_key: Option<String>,
    pub max_request_bytes: usize,
    pub max_batch_points: usize,
    pub max_json_depth: usize,
    pub max_pending_writes: usize,
    /// Bytes of request bodies being received at once, all connections together.
    pub max_inflight_request_bytes: usize,
    /// Open client connections.
    pub max_connections: usize,
    /// Open connections from one client address (IPv6: one /64).
    pub max_connections_per_ip: usize,
    /// Seconds to receive a request head.
    pub header_read_timeout_secs: u64,
    /// Seconds of grace for a request body or gRPC message (see `min_body_bytes_per_sec`)
    /// and for a stalled response write.
    pub body_read_timeout_secs: u64,
    /// Body bytes that buy one more second to receive the rest.
    pub min_body_bytes_per_sec: u64,
    /// Seconds an idle keep-alive connection stays open.
    pub keep_alive_timeout_secs: u64,
    /// Worker threads of the HTTP runtime (0 = one per core).
    pub http_threads: usize,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            host: DEFAULT_HOST.to_string(),
            port: DEFAULT_PORT,
            grpc_port: DEFAULT_GRPC_PORT,
            data_dir: PathBuf::from(DEFAULT_DATA_DIR),
            stripe_dirs: Vec::new(),
            api_key: None,
            read_only_api_key: None,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_batch_points: DEFAULT_MAX_BATCH_POINTS,
            max_json_depth: DEFAULT_MAX_JSON_DEPTH,
            max_pending_writes: DEFAULT_MAX_PENDING_WRITES,
            max_inflight_request_bytes: DEFAULT_MAX_INFLIGHT_REQUEST_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
            header_read_timeout_secs: DEFAULT_HEADER_READ_TIMEOUT_SECS,
            body_read_timeout_secs: DEFAULT_BODY_READ_TIMEOUT_SECS,
            min_body_bytes_per_sec: DEFAULT_MIN_BODY_BYTES_PER_SEC,
            keep_alive_timeout_secs: DEFAULT_KEEP_ALIVE_TIMEOUT_SECS,
            http_threads: 0,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file `{path}`: {reason}")]
    File { path: String, reason: String },
    #[error("environment variable {name}={value:?}: {reason}")]
    Environment {
        name: &'static str,
        value: String,
        reason: String,
    },
    #[error("setting `{field}` = {value}: {reason}")]
    Invalid {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
}

/// Environment variables read by [`ServerConfig::apply_environment`], with the field each
/// sets.
pub const ENVIRONMENT_VARIABLES: [(&str, &str); 17] = [
    ("SAGITTA_HOST", "host"),
    ("SAGITTA_PORT", "port"),
    ("SAGITTA_GRPC_PORT", "grpc_port"),
    ("SAGITTA_DATA_DIR", "data_dir"),
    ("SAGITTA_API_KEY", "api_key"),
    ("SAGITTA_READ_ONLY_API_KEY", "read_only_api_key"),
    ("SAGITTA_MAX_REQUEST_BYTES", "max_request_bytes"),
    ("SAGITTA_MAX_BATCH_POINTS", "max_batch_points"),
    ("SAGITTA_MAX_JSON_DEPTH", "max_json_depth"),
    ("SAGITTA_MAX_PENDING_WRITES", "max_pending_writes"),
    (
        "SAGITTA_MAX_INFLIGHT_REQUEST_BYTES",
        "max_inflight_request_bytes",
    ),
    ("SAGITTA_MAX_CONNECTIONS", "max_connections"),
    ("SAGITTA_MAX_CONNECTIONS_PER_IP", "max_connections_per_ip"),
    (
        "SAGITTA_HEADER_READ_TIMEOUT_SECS",
        "header_read_timeout_secs",
    ),
    ("SAGITTA_BODY_READ_TIMEOUT_SECS", "body_read_timeout_secs"),
    ("SAGITTA_MIN_BODY_BYTES_PER_SEC", "min_body_bytes_per_sec"),
    ("SAGITTA_KEEP_ALIVE_TIMEOUT_SECS", "keep_alive_timeout_secs"),
];

impl ServerConfig {
    /// Defaults overridden by the TOML file at `path` (keys as the field names above).
    pub fn from_file(path: &Path) -> Result<ServerConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::File {
            path: path.display().to_string(),
            reason: error.to_string(),
        })?;
        toml::from_str(&text).map_err(|error| ConfigError::File {
            path: path.display().to_string(),
            reason: error.to_string(),
        })
    }

    /// Applies the `SAGITTA_*` variables of [`ENVIRONMENT_VARIABLES`] found by `lookup`.
    pub fn apply_environment(
        &mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        fn number<T: std::str::FromStr>(name: &'static str, value: &str) -> Result<T, ConfigError> {
            value.parse().map_err(|_| ConfigError::Environment {
                name,
                value: value.to_string(),
                reason: "not a non-negative integer in range".to_string(),
            })
        }
        for (name, _) in ENVIRONMENT_VARIABLES {
            let Some(value) = lookup(name) else { continue };
            match name {
                "SAGITTA_HOST" => self.host = value,
                "SAGITTA_PORT" => self.port = number(name, &value)?,
                "SAGITTA_GRPC_PORT" => self.grpc_port = number(name, &value)?,
                "SAGITTA_DATA_DIR" => self.data_dir = PathBuf::from(value),
                "SAGITTA_API_KEY" => self.api_key = Some(value),
                "SAGITTA_READ_ONLY_API_KEY" => self.read_only_api_key = Some(value),
                "SAGITTA_MAX_REQUEST_BYTES" => self.max_request_bytes = number(name, &value)?,
                "SAGITTA_MAX_BATCH_POINTS" => self.max_batch_points = number(name, &value)?,
                "SAGITTA_MAX_JSON_DEPTH" => self.max_json_depth = number(name, &value)?,
                "SAGITTA_MAX_PENDING_WRITES" => self.max_pending_writes = number(name, &value)?,
                "SAGITTA_MAX_INFLIGHT_REQUEST_BYTES" => {
                    self.max_inflight_request_bytes = number(name, &value)?;
                }
                "SAGITTA_MAX_CONNECTIONS" => self.max_connections = number(name, &value)?,
                "SAGITTA_MAX_CONNECTIONS_PER_IP" => {
                    self.max_connections_per_ip = number(name, &value)?;
                }
                "SAGITTA_HEADER_READ_TIMEOUT_SECS" => {
                    self.header_read_timeout_secs = number(name, &value)?;
                }
                "SAGITTA_BODY_READ_TIMEOUT_SECS" => {
                    self.body_read_timeout_secs = number(name, &value)?;
                }
                "SAGITTA_MIN_BODY_BYTES_PER_SEC" => {
                    self.min_body_bytes_per_sec = number(name, &value)?;
                }
                "SAGITTA_KEEP_ALIVE_TIMEOUT_SECS" => {
                    self.keep_alive_timeout_secs = number(name, &value)?;
                }
                _ => unreachable!("every listed variable is handled"),
            }
        }
        Ok(())
    }

    /// Rejects settings the server cannot run with.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_limits()?;
        self.validate_timeouts()?;
        if self.max_inflight_request_bytes < self.max_request_bytes {
            return Err(ConfigError::Invalid {
                field: "max_inflight_request_bytes",
                value: self.max_inflight_request_bytes.to_string(),
                reason: "must be at least max_request_bytes, or no request that large could ever be received",
            });
        }
        if self.grpc_port != 0 && self.grpc_port == self.port {
            return Err(ConfigError::Invalid {
                field: "grpc_port",
                value: self.grpc_port.to_string(),
                reason: "must differ from port (REST and gRPC listen on ports of their own)",
            });
        }
        self.validate_keys()
    }

    /// Rejects a size or count limit of 0.
    fn validate_limits(&self) -> Result<(), ConfigError> {
        let positive = [
            ("max_request_bytes", self.max_request_bytes),
            ("max_batch_points", self.max_batch_points),
            ("max_json_depth", self.max_json_depth),
            ("max_pending_writes", self.max_pending_writes),
            (
                "max_inflight_request_bytes",
                self.max_inflight_request_bytes,
            ),
            ("max_connections", self.max_connections),
            ("max_connections_per_ip", self.max_connections_per_ip),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(ConfigError::Invalid {
                    field,
                    value: value.to_string(),
                    reason: "must be at least 1",
                });
            }
        }
        Ok(())
    }

    /// Rejects a timeout (or the body rate) of 0, and a timeout over a week.
    fn validate_timeouts(&self) -> Result<(), ConfigError> {
        let seconds = [
            ("header_read_timeout_secs", self.header_read_timeout_secs),
            ("body_read_timeout_secs", self.body_read_timeout_secs),
            ("min_body_bytes_per_sec", self.min_body_bytes_per_sec),
            ("keep_alive_timeout_secs", self.keep_alive_timeout_secs),
        ];
        for (field, value) in seconds {
            if value == 0 {
                return Err(ConfigError::Invalid {
                    field,
                    value: value.to_string(),
                    reason: "must be at least 1",
                });
            }
            // Deadlines are kept in milliseconds: a week is plenty and cannot overflow.
            if value > 7 * 24 * 3600 && field != "min_body_bytes_per_sec" {
                return Err(ConfigError::Invalid {
                    field,
                    value: value.to_string(),
                    reason: "must be at most 604800 (a week)",
                });
            }
        }
        Ok(())
    }

    /// Rejects an empty API key, and a read-only key equal to the read-write one.
    fn validate_keys(&self) -> Result<(), ConfigError> {
        for (field, key) in [
            ("api_key", &self.api_key),
            ("read_only_api_key", &self.read_only_api_key),
        ] {
            if key.as_deref().is_some_and(str::is_empty) {
                return Err(ConfigError::Invalid {
                    field,
                    value: "\"\"".to_string(),
                    reason: "an empty key would let anyone in; leave it unset instead",
                });
            }
        }
        if self.api_key.is_some() && self.api_key == self.read_only_api_key {
            return Err(ConfigError::Invalid {
                field: "read_only_api_key",
                value: "(same as api_key)".to_string(),
                reason: "must differ from api_key",
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_then_environment_override_defaults() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("sagitta.toml");
        std::fs::write(&path, "port = 7000\napi_key = \"secret\"\n").unwrap();
        let mut config = ServerConfig::from_file(&path).unwrap();
        assert_eq!(config.port, 7000);
        assert_eq!(config.host, DEFAULT_HOST);
        config
            .apply_environment(|name| match name {
                "SAGITTA_PORT" => Some("7100".to_string()),
                "SAGITTA_MAX_CONNECTIONS_PER_IP" => Some("64".to_string()),
                "SAGITTA_KEEP_ALIVE_TIMEOUT_SECS" => Some("5".to_string()),
                _ => None,
            })
            .unwrap();
        assert_eq!(config.port, 7100);
        assert_eq!(config.max_connections_per_ip, 64);
        assert_eq!(config.keep_alive_timeout_secs, 5);
        assert_eq!(config.api_key.as_deref(), Some("secret"));
        config.validate().unwrap();
    }

    #[test]
    fn bad_settings_name_the_field() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("sagitta.toml");
        std::fs::write(&path, "prot = 7000\n").unwrap();
        let error = ServerConfig::from_file(&path).unwrap_err().to_string();
        assert!(error.contains("prot"), "{error}");
        let mut config = ServerConfig::default();
        let error = config
            .apply_environment(|name| (name == "SAGITTA_PORT").then(|| "70000".to_string()))
            .unwrap_err()
            .to_string();
        assert!(error.contains("SAGITTA_PORT"), "{error}");
        config.max_json_depth = 0;
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("max_json_depth"), "{error}");
        config.max_json_depth = DEFAULT_MAX_JSON_DEPTH;
        config.keep_alive_timeout_secs = 0;
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("keep_alive_timeout_secs"), "{error}");
        config.keep_alive_timeout_secs = DEFAULT_KEEP_ALIVE_TIMEOUT_SECS;
        config.max_inflight_request_bytes = config.max_request_bytes - 1;
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("max_inflight_request_bytes"), "{error}");
        let config = ServerConfig {
            api_key: Some(String::new()),
            ..ServerConfig::default()
        };
        assert!(config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("api_key"));
    }
}

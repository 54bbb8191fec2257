//! The binary's logger: records of the `log` facade (the engine's optimizer reports its
//! seals, merges and vacuums at info level) written to stderr as one line each,
//! `<UTC time> <LEVEL> <target>: <message>`. The level is `SAGITTA_LOG` (`error`, `warn`,
//! `info`, `debug`, `trace` or `off`; default `info`).

use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use log::{LevelFilter, Log, Metadata, Record};

struct StderrLogger;

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let seconds = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        say(format_args!(
            "{} {} {}: {}",
            sagitta_storage::utc::utc_timestamp(seconds),
            record.level(),
            record.target(),
            record.args()
        ));
    }

    fn flush(&self) {}
}

static LOGGER: StderrLogger = StderrLogger;

/// Writes `line` and a newline to stderr in one write. `eprintln!` writes each piece of its
/// format separately (stderr is unbuffered), so the lines of several threads, or of the
/// ranks of an MPI job whose outputs mpirun merges, could interleave mid-line: CI once saw
/// rank 0's "listening on" split by another rank's line, and the test waiting for the
/// address never found it.
pub fn say(line: std::fmt::Arguments<'_>) {
    let mut text = line.to_string();
    text.push('\n');
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// The level `SAGITTA_LOG` names (`info` when unset); an unknown name is an error naming it.
pub fn level_from_env() -> Result<LevelFilter, String> {
    match std::env::var("SAGITTA_LOG") {
        Err(_) => Ok(LevelFilter::Info),
        Ok(name) => name.parse().map_err(|_| {
            format!("SAGITTA_LOG = {name:?}: expected off, error, warn, info, debug or trace")
        }),
    }
}

/// Installs the logger at `level` (once; a second call changes only the level).
pub fn install(level: LevelFilter) {
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(level);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_level_comes_from_the_environment_and_a_bad_name_is_refused() {
        // one test touches SAGITTA_LOG, so no other reads it meanwhile
        std::env::remove_var("SAGITTA_LOG");
        assert_eq!(level_from_env(), Ok(LevelFilter::Info));
        std::env::set_var("SAGITTA_LOG", "warn");
        assert_eq!(level_from_env(), Ok(LevelFilter::Warn));
        std::env::set_var("SAGITTA_LOG", "loud");
        let error = level_from_env().unwrap_err();
        assert!(
            error.contains("SAGITTA_LOG") && error.contains("loud"),
            "{error}"
        );
        std::env::remove_var("SAGITTA_LOG");
    }
}

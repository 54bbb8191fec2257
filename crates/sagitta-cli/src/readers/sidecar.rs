//! Payloads for dense formats: a JSON Lines file, one JSON object per row, in row order.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use sagitta_engine::collection::MAX_PAYLOAD_BYTES;

use super::{ImportError, Location};

const READ_BUFFER_BYTES: usize = 1 << 20;
/// Longest line read: a payload at the limit plus `\r\n` (a longer line is not buffered whole).
const MAX_LINE_BYTES: u64 = MAX_PAYLOAD_BYTES as u64 + 2;

/// Reads exactly `row_count` payload lines; returns them (as JSON text) and the file size.
pub(super) fn read_payloads(
    path: &Path,
    row_count: usize,
) -> Result<(Vec<String>, u64), ImportError> {
    let file = File::open(path).map_err(|error| ImportError::io(path, error))?;
    let file_bytes = file
        .metadata()
        .map_err(|error| ImportError::io(path, error))?
        .len();
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, file);
    let mut payloads = Vec::with_capacity(row_count);
    let mut line = String::new();
    loop {
        let location = Location::Line(payloads.len() as u64 + 1);
        line.clear();
        let read_bytes = (&mut reader)
            .take(MAX_LINE_BYTES)
            .read_line(&mut line)
            .map_err(|error| {
                if error.kind() == std::io::ErrorKind::InvalidData {
                    ImportError::invalid(path, location, "line is not UTF-8")
                } else {
                    ImportError::io(path, error)
                }
            })?;
        if read_bytes == 0 {
            break;
        }
        if payloads.len() == row_count {
            return Err(ImportError::invalid(
                path,
                location,
                format!("more payload lines than the {row_count} rows of vectors"),
            ));
        }
        payloads.push(parse_payload(path, location, &line)?);
    }
    if payloads.len() != row_count {
        return Err(ImportError::invalid(
            path,
            Location::File,
            format!(
                "has {} payload lines for {row_count} rows of vectors",
                payloads.len()
            ),
        ));
    }
    Ok((payloads, file_bytes))
}

/// One line: a JSON object of at most [`MAX_PAYLOAD_BYTES`], kept as written.
fn parse_payload(path: &Path, location: Location, line: &str) -> Result<String, ImportError> {
    let text = line.trim_end_matches(['\n', '\r']);
    if text.len() > MAX_PAYLOAD_BYTES {
        return Err(ImportError::invalid(
            path,
            location,
            format!(
                "payload is {} bytes, over the limit of {MAX_PAYLOAD_BYTES}",
                text.len()
            ),
        ));
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(_)) => Ok(text.to_string()),
        Ok(other) => Err(ImportError::invalid(
            path,
            location,
            format!("payload is not a JSON object but {}", json_kind(&other)),
        )),
        Err(error) => Err(ImportError::invalid(
            path,
            location,
            format!("payload is not valid JSON: {error}"),
        )),
    }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

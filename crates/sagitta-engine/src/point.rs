//! Points, ids and distances.

use std::fmt;

/// A point id: an unsigned integer or a UUID (stored as its 128-bit value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PointId {
    Number(u64),
    Uuid(u128),
}

impl PointId {
    /// Shard routing hash (splitmix64 finalizer): stable across versions and platforms.
    pub fn routing_hash(&self) -> u64 {
        let mut x = match self {
            PointId::Number(value) => *value,
            #[allow(clippy::cast_possible_truncation)]
            PointId::Uuid(value) => (*value as u64) ^ ((*value >> 64) as u64).rotate_left(17),
        };
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }
}

impl fmt::Display for PointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PointId::Number(value) => write!(f, "{value}"),
            PointId::Uuid(value) => {
                let hex = format!("{value:032x}");
                write!(
                    f,
                    "{}-{}-{}-{}-{}",
                    &hex[0..8],
                    &hex[8..12],
                    &hex[12..16],
                    &hex[16..20],
                    &hex[20..32]
                )
            }
        }
    }
}

/// Parses a UUID in its hyphenated (or plain 32-hex-digit) text form.
pub fn parse_uuid(text: &str) -> Option<u128> {
    let hex: String = text.chars().filter(|c| *c != '-').collect();
    let canonical_hyphens = [8, 13, 18, 23];
    let hyphenated = text.len() == 36
        && canonical_hyphens
            .iter()
            .all(|i| text.as_bytes().get(*i) == Some(&b'-'))
        && text.matches('-').count() == 4;
    if hex.len() != 32 || !(hyphenated || text.len() == 32) {
        return None;
    }
    u128::from_str_radix(&hex, 16).ok()
}

/// Qdrant's distance names. Scores: similarity for Cosine and Dot (higher is closer),
/// Euclidean distance for Euclid (lower is closer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distance {
    Cosine,
    Dot,
    Euclid,
}

impl Distance {
    pub(crate) fn code(self) -> u8 {
        match self {
            Distance::Cosine => 0,
            Distance::Dot => 1,
            Distance::Euclid => 2,
        }
    }
    pub(crate) fn from_code(code: u8) -> Option<Distance> {
        match code {
            0 => Some(Distance::Cosine),
            1 => Some(Distance::Dot),
            2 => Some(Distance::Euclid),
            _ => None,
        }
    }
}

/// A point as stored: vector (normalized for Cosine) and payload as JSON text.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub id: PointId,
    pub vector: Vec<f32>,
    pub payload: Option<String>,
}

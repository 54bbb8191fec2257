//! Points, ids and distances.

use std::fmt;

pub use crate::distance::Distance;
use crate::multi::MultiVector;
use crate::sparse::SparseVector;

/// A point id: an unsigned integer or a UUID (stored as its 128-bit value).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
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

/// Parses UUID text in the four forms Qdrant accepts (those of the `uuid` crate's
/// `Uuid::parse_str`): 32 hex digits (`simple`), hyphenated 8-4-4-4-12, hyphenated in
/// braces (`{...}`), and hyphenated after `urn:uuid:`. Hex digits may be either case;
/// anything else (a sign, spaces, hyphens elsewhere) is refused.
pub fn parse_uuid(text: &str) -> Option<u128> {
    let bytes = text.as_bytes();
    let hyphenated = match bytes.len() {
        32 => return hex_digits(bytes),
        36 => bytes,
        38 if bytes[0] == b'{' && bytes[37] == b'}' => &bytes[1..37],
        45 if bytes.starts_with(b"urn:uuid:") => &bytes[9..],
        _ => return None,
    };
    let mut digits = [0u8; 32];
    let mut count = 0;
    for (position, byte) in hyphenated.iter().enumerate() {
        let hyphen_here = matches!(position, 8 | 13 | 18 | 23);
        if hyphen_here != (*byte == b'-') {
            return None;
        }
        if !hyphen_here {
            digits[count] = *byte;
            count += 1;
        }
    }
    hex_digits(&digits)
}

/// The value of exactly 32 ASCII hex digits (no sign, no separators).
fn hex_digits(digits: &[u8]) -> Option<u128> {
    if digits.len() != 32 {
        return None;
    }
    digits.iter().try_fold(0u128, |value, byte| {
        let digit = char::from(*byte).to_digit(16)?;
        Some((value << 4) | u128::from(digit))
    })
}

/// A point as stored: vector (normalized for Cosine), payload as JSON text, and its
/// vectors beside the dense one — none, or one entry per side space of the collection
/// ([`crate::spaces::VectorSpaces::side`]), `None` where the point has no vector there.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Point {
    pub id: PointId,
    pub vector: Vec<f32>,
    pub payload: Option<String>,
    pub side: Vec<Option<SideVector>>,
}

/// A vector kept beside a point's dense stored vector: a sparse vector or a multivector,
/// as its space is ([`crate::spaces::SideSpace`]).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum SideVector {
    Sparse(SparseVector),
    Multi(MultiVector),
}

impl SideVector {
    pub fn as_sparse(&self) -> Option<&SparseVector> {
        match self {
            SideVector::Sparse(vector) => Some(vector),
            SideVector::Multi(_) => None,
        }
    }

    pub fn as_multi(&self) -> Option<&MultiVector> {
        match self {
            SideVector::Multi(vector) => Some(vector),
            SideVector::Sparse(_) => None,
        }
    }

    /// Heap bytes of the vector.
    pub fn bytes(&self) -> usize {
        match self {
            SideVector::Sparse(vector) => vector.bytes(),
            SideVector::Multi(vector) => vector.bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuid_text_forms() {
        let value = 0x5c56_c793_69f3_4fbf_87e6_c4bf_54c2_8c26_u128;
        for text in [
            "5c56c793-69f3-4fbf-87e6-c4bf54c28c26",
            "5C56C793-69F3-4FBF-87E6-C4BF54C28C26",
            "5c56c79369f34fbf87e6c4bf54c28c26",
            "{5c56c793-69f3-4fbf-87e6-c4bf54c28c26}",
            "urn:uuid:5c56c793-69f3-4fbf-87e6-c4bf54c28c26",
        ] {
            assert_eq!(parse_uuid(text), Some(value), "{text}");
        }
        for text in [
            "+f9619ff8b86d011b42d00c04fc964ff",
            "+c56c793-69f3-4fbf-87e6-c4bf54c28c26",
            "5c56c793-69f3-4fbf-87e6-c4bf54c28c2g",
            "5c56c79-369f3-4fbf-87e6-c4bf54c28c26",
            "5c56c793-69f3-4fbf-87e6c-4bf54c28c26",
            "{5c56c79369f34fbf87e6c4bf54c28c26}",
            "(5c56c793-69f3-4fbf-87e6-c4bf54c28c26)",
            "URN:UUID:5c56c793-69f3-4fbf-87e6-c4bf54c28c26",
            " 5c56c79369f34fbf87e6c4bf54c28c2",
            "5c56c793-69f3-4fbf-87e6-c4bf54c28c26 ",
            "",
            "7",
        ] {
            assert_eq!(parse_uuid(text), None, "{text}");
        }
        assert_eq!(
            PointId::Uuid(value).to_string(),
            "5c56c793-69f3-4fbf-87e6-c4bf54c28c26"
        );
    }
}

//! Qdrant's distances: the one value type every vector kind is compared by.

/// Qdrant's distance names. Scores: similarity for Cosine and Dot (higher is closer),
/// Euclidean distance for Euclid (lower is closer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Distance {
    Cosine,
    Dot,
    Euclid,
}

impl Distance {
    /// Qdrant's name of the distance.
    pub fn name(self) -> &'static str {
        match self {
            Distance::Cosine => "Cosine",
            Distance::Dot => "Dot",
            Distance::Euclid => "Euclid",
        }
    }

    /// The distance Qdrant calls `name` (spelled as Qdrant spells it: `Cosine`, `Dot`,
    /// `Euclid`), or why not: the one parser of distance names, used by the server, the
    /// Python binding and the command line.
    pub fn from_name(name: &str) -> Result<Distance, String> {
        match name {
            "Cosine" => Ok(Distance::Cosine),
            "Dot" => Ok(Distance::Dot),
            "Euclid" => Ok(Distance::Euclid),
            "Manhattan" => {
                Err("Manhattan distance is not supported; use Cosine, Dot or Euclid".to_string())
            }
            other => Err(format!(
                "unknown distance `{other}`, expected one of `Cosine`, `Dot`, `Euclid`"
            )),
        }
    }

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

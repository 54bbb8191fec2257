//! Named vectors (issue 16 §1): a collection may give each point several dense vectors,
//! each in its own *space* — a name, a dimension and a distance (Qdrant's
//! `vectors: {"text": {...}, "image": {...}}`).
//!
//! Storage: a point's stored vector is its spaces' vectors one after another, in the
//! collection's space order (space `s` at [`VectorSpaces::offset`]`(s)`); a vector the
//! point does not have is stored as NaNs. Every stored value is otherwise finite (writes
//! and queries are checked), so a NaN first value means "absent" and nothing else. The log,
//! the write buffer and the points files need nothing new; the segments of a collection
//! with named vectors are of the kind [`crate::segment::SegmentKindName::Spaces`], one HNSW
//! graph per space over the points that have a vector there.
//!
//! A collection made with one unnamed vector has no spaces ([`VectorSpaces::is_named`] is
//! false) and is stored exactly as before: one vector of the collection's dimension.

use sagitta_storage::codec::{DecodeError, Reader, Writer};

use crate::error::{EngineError, Result};
use crate::point::Distance;

/// Most named vectors a collection may have.
pub const MAX_SPACES: usize = 64;
/// Longest vector name, in bytes.
pub const MAX_SPACE_NAME_BYTES: usize = 255;

/// One named vector of a collection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VectorSpace {
    pub name: String,
    pub dim: usize,
    pub distance: Distance,
}

/// The named vectors of a collection, in storage order; empty for a collection with one
/// unnamed vector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VectorSpaces {
    spaces: Vec<VectorSpace>,
    offsets: Vec<usize>,
}

/// Where one space's vector lies in a stored vector, and how it is compared: what a
/// search passes down to the write buffer and the segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SpaceSlice {
    /// The space's number (0 for a collection without named vectors).
    pub index: usize,
    pub offset: usize,
    pub dim: usize,
    pub distance: Distance,
}

impl SpaceSlice {
    /// The whole vector of a collection without named vectors.
    pub fn whole(dim: usize, distance: Distance) -> SpaceSlice {
        SpaceSlice {
            index: 0,
            offset: 0,
            dim,
            distance,
        }
    }

    /// This space's part of a stored vector; `None` when the point has no vector here.
    #[inline]
    pub fn of<'a>(&self, vector: &'a [f32]) -> Option<&'a [f32]> {
        let part = vector.get(self.offset..self.offset + self.dim)?;
        (!part.first().is_some_and(|value| value.is_nan())).then_some(part)
    }
}

impl VectorSpaces {
    /// Named vectors in this order. Names must be 1 to [`MAX_SPACE_NAME_BYTES`] bytes and
    /// distinct; dimensions 1 to `max_dim`; their sum at most `max_dim` too.
    pub fn new(spaces: Vec<VectorSpace>, max_dim: usize) -> Result<VectorSpaces> {
        let invalid = |reason: String| EngineError::InvalidVectors { reason };
        if spaces.is_empty() || spaces.len() > MAX_SPACES {
            return Err(invalid(format!(
                "{} named vectors; a collection has 1 to {MAX_SPACES}",
                spaces.len()
            )));
        }
        let mut offsets = Vec::with_capacity(spaces.len());
        let mut total = 0usize;
        for (index, space) in spaces.iter().enumerate() {
            if space.name.is_empty() || space.name.len() > MAX_SPACE_NAME_BYTES {
                return Err(invalid(format!(
                    "vector name {:?}: use 1 to {MAX_SPACE_NAME_BYTES} bytes",
                    space.name
                )));
            }
            if spaces[..index].iter().any(|other| other.name == space.name) {
                return Err(invalid(format!("vector name {:?} given twice", space.name)));
            }
            if space.dim == 0 || space.dim > max_dim {
                return Err(invalid(format!(
                    "`{}.size` = {}: must be 1 to {max_dim}",
                    space.name, space.dim
                )));
            }
            offsets.push(total);
            total += space.dim;
        }
        if total > max_dim {
            return Err(invalid(format!(
                "the named vectors' sizes add up to {total}, over the limit of {max_dim}"
            )));
        }
        Ok(VectorSpaces { spaces, offsets })
    }

    /// Whether the collection has named vectors.
    pub fn is_named(&self) -> bool {
        !self.spaces.is_empty()
    }

    pub fn len(&self) -> usize {
        self.spaces.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spaces.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &VectorSpace> {
        self.spaces.iter()
    }

    pub fn get(&self, index: usize) -> Option<&VectorSpace> {
        self.spaces.get(index)
    }

    /// The number of the space called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.spaces.iter().position(|space| space.name == name)
    }

    /// Where space `index` starts in a stored vector.
    pub fn offset(&self, index: usize) -> usize {
        self.offsets[index]
    }

    /// The width of a stored vector: every space's dimension added up.
    pub fn total_dim(&self) -> usize {
        self.spaces.iter().map(|space| space.dim).sum()
    }

    pub(crate) fn slice(&self, index: usize) -> SpaceSlice {
        let space = &self.spaces[index];
        SpaceSlice {
            index,
            offset: self.offsets[index],
            dim: space.dim,
            distance: space.distance,
        }
    }

    /// Every space's slice, in order.
    pub(crate) fn slices(&self) -> Vec<SpaceSlice> {
        (0..self.len()).map(|index| self.slice(index)).collect()
    }

    /// A stored vector from each space's vector or `None` (absent: NaNs). `parts` must
    /// have one entry per space, each of its space's dimension.
    pub fn join(&self, parts: &[Option<&[f32]>]) -> Vec<f32> {
        debug_assert_eq!(parts.len(), self.len());
        let mut vector = Vec::with_capacity(self.total_dim());
        for (space, part) in self.spaces.iter().zip(parts) {
            match part {
                Some(values) => {
                    debug_assert_eq!(values.len(), space.dim);
                    vector.extend_from_slice(values);
                }
                None => vector.extend(std::iter::repeat_n(f32::NAN, space.dim)),
            }
        }
        vector
    }

    /// Space `index`'s vector of a stored vector, `None` where the point has none.
    pub fn part<'a>(&self, index: usize, vector: &'a [f32]) -> Option<&'a [f32]> {
        self.slice(index).of(vector)
    }

    /// Each space's vector of a stored vector, `None` where the point has none.
    pub fn split<'a>(&self, vector: &'a [f32]) -> Vec<Option<&'a [f32]>> {
        (0..self.len())
            .map(|index| self.part(index, vector))
            .collect()
    }

    /// The spaces as the collection manifest stores them (docs/format.md): a u32 count,
    /// then per space its distance code, u32 dimension and u16-length name.
    pub(crate) fn encode_into(&self, out: &mut Writer) {
        out.len_u32(self.len(), "bounded space count");
        for space in &self.spaces {
            out.u8(space.distance.code())
                .len_u32(space.dim, "validated dim")
                .str_u16(&space.name, "bounded vector name");
        }
    }

    /// Reads what [`VectorSpaces::encode_into`] wrote; `max_dim` as in [`VectorSpaces::new`].
    pub(crate) fn decode(reader: &mut Reader, max_dim: usize) -> Result<VectorSpaces, DecodeError> {
        let at = reader.offset();
        let count = reader.u32("space_count")? as usize;
        if count > MAX_SPACES {
            return Err(Reader::invalid_at(
                at,
                "space_count",
                format!("{count} named vectors, more than {MAX_SPACES}"),
            ));
        }
        if count == 0 {
            return Ok(VectorSpaces::default());
        }
        let mut spaces = Vec::with_capacity(count);
        for _ in 0..count {
            let distance = reader.code("vector distance", Distance::from_code)?;
            let dim = reader.u32("vector dim")? as usize;
            let name = reader.str_u16("vector name")?.to_string();
            spaces.push(VectorSpace {
                name,
                dim,
                distance,
            });
        }
        VectorSpaces::new(spaces, max_dim)
            .map_err(|error| Reader::invalid_at(at, "named vectors", error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space(name: &str, dim: usize, distance: Distance) -> VectorSpace {
        VectorSpace {
            name: name.to_string(),
            dim,
            distance,
        }
    }

    #[test]
    fn a_stored_vector_joins_and_splits_with_absent_parts_as_nans() {
        let spaces = VectorSpaces::new(
            vec![
                space("text", 2, Distance::Cosine),
                space("image", 3, Distance::Dot),
            ],
            100,
        )
        .unwrap();
        assert_eq!(spaces.total_dim(), 5);
        assert_eq!(spaces.offset(1), 2);
        let joined = spaces.join(&[None, Some(&[1.0, 2.0, 3.0])]);
        assert!(joined[..2].iter().all(|value| value.is_nan()));
        assert_eq!(
            spaces.split(&joined),
            vec![None, Some(&[1.0, 2.0, 3.0][..])]
        );
        assert_eq!(spaces.index_of("image"), Some(1));
        assert_eq!(spaces.index_of("code"), None);
        let mut out = Writer::new();
        spaces.encode_into(&mut out);
        let bytes = out.into_bytes();
        let mut reader = Reader::new(&bytes);
        assert_eq!(VectorSpaces::decode(&mut reader, 100).unwrap(), spaces);
    }

    #[test]
    fn bad_spaces_are_refused_naming_the_fault() {
        let error =
            |spaces: Vec<VectorSpace>| VectorSpaces::new(spaces, 10).unwrap_err().to_string();
        assert!(error(vec![]).contains("0 named vectors"));
        assert!(error(vec![space("", 2, Distance::Dot)]).contains("vector name \"\""));
        assert!(error(vec![
            space("a", 2, Distance::Dot),
            space("a", 2, Distance::Dot)
        ])
        .contains("given twice"));
        assert!(error(vec![space("a", 0, Distance::Dot)]).contains("`a.size` = 0"));
        assert!(error(vec![
            space("a", 6, Distance::Dot),
            space("b", 6, Distance::Dot)
        ])
        .contains("add up to 12"));
    }
}

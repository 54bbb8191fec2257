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

/// Whether a stored vector (or a named vector's part of one) is absent: NaNs in place of
/// values. In a collection with one unnamed vector a point without it is stored as NaNs
/// too, and no search finds it until a vector is written for it.
pub use sagitta_index::metric::is_absent;
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

/// One sparse vector of a collection ([`crate::sparse`]): a name and whether queries are
/// weighted by inverse document frequency (Qdrant's `modifier: "idf"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SparseSpace {
    pub name: String,
    pub idf: bool,
}

impl SparseSpace {
    /// Whether Qdrant's `modifier` (absent, `"none"` or `"idf"`) asks for IDF weights;
    /// `None` for any other value.
    pub fn idf_of_modifier(modifier: Option<&str>) -> Option<bool> {
        match modifier {
            None | Some("none") => Some(false),
            Some("idf") => Some(true),
            Some(_) => None,
        }
    }
}

/// One multivector of a collection ([`crate::multi`]): a name, the width of its rows and
/// the distance rows are compared by (max_sim over them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiSpace {
    pub name: String,
    pub dim: usize,
    pub distance: Distance,
}

/// A vector kept beside the dense stored vector ([`crate::point::SideVector`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SideSpace {
    Sparse(SparseSpace),
    Multi(MultiSpace),
}

impl SideSpace {
    pub fn name(&self) -> &str {
        match self {
            SideSpace::Sparse(space) => &space.name,
            SideSpace::Multi(space) => &space.name,
        }
    }

    pub fn as_sparse(&self) -> Option<&SparseSpace> {
        match self {
            SideSpace::Sparse(space) => Some(space),
            SideSpace::Multi(_) => None,
        }
    }

    pub fn as_multi(&self) -> Option<&MultiSpace> {
        match self {
            SideSpace::Multi(space) => Some(space),
            SideSpace::Sparse(_) => None,
        }
    }
}

/// The named vectors of a collection, in storage order; empty for a collection with one
/// unnamed vector. Dense spaces lie side by side in the stored vector; side spaces
/// (sparse vectors and multivectors) are numbered apart (a point's `side[i]` is side
/// space `i`'s).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VectorSpaces {
    spaces: Vec<VectorSpace>,
    offsets: Vec<usize>,
    side: Vec<SideSpace>,
    /// Made from a map of vectors (possibly empty: a collection of payloads alone).
    named: bool,
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
        (!is_absent(part)).then_some(part)
    }
}

impl VectorSpaces {
    /// Named vectors in this order. Names must be 1 to [`MAX_SPACE_NAME_BYTES`] bytes and
    /// distinct; dimensions 1 to `max_dim`; their sum at most `max_dim` too.
    pub fn new(spaces: Vec<VectorSpace>, max_dim: usize) -> Result<VectorSpaces> {
        VectorSpaces::with_side(spaces, Vec::new(), max_dim)
    }

    /// Dense named vectors and sparse ones, as [`VectorSpaces::with_side`].
    pub fn with_sparse(
        spaces: Vec<VectorSpace>,
        sparse: Vec<SparseSpace>,
        max_dim: usize,
    ) -> Result<VectorSpaces> {
        let side = sparse.into_iter().map(SideSpace::Sparse).collect();
        VectorSpaces::with_side(spaces, side, max_dim)
    }

    /// Dense named vectors `spaces` (as [`VectorSpaces::new`], but possibly none) and
    /// side ones `side` (sparse vectors, multivectors), every name distinct; none at all
    /// is a collection whose points have payloads only (Qdrant's `vectors: {}`). One
    /// vector may be named `""` (the unnamed one): a dense one when the collection has
    /// side vectors beside it, or the only multivector.
    pub fn with_side(
        spaces: Vec<VectorSpace>,
        side: Vec<SideSpace>,
        max_dim: usize,
    ) -> Result<VectorSpaces> {
        let invalid = |reason: String| EngineError::InvalidVectors { reason };
        let count = spaces.len() + side.len();
        if count > MAX_SPACES {
            return Err(invalid(format!(
                "{count} named vectors; a collection has 1 to {MAX_SPACES}"
            )));
        }
        let names: Vec<&str> = spaces
            .iter()
            .map(|space| space.name.as_str())
            .chain(side.iter().map(SideSpace::name))
            .collect();
        let multi_alone = spaces.is_empty() && matches!(side.as_slice(), [SideSpace::Multi(_)]);
        for (index, name) in names.iter().enumerate() {
            let unnamed_allowed = (index < spaces.len() && !side.is_empty()) || multi_alone;
            if (name.is_empty() && !unnamed_allowed) || name.len() > MAX_SPACE_NAME_BYTES {
                return Err(invalid(format!(
                    "vector name {name:?}: use 1 to {MAX_SPACE_NAME_BYTES} bytes"
                )));
            }
            if names[..index].contains(name) {
                return Err(invalid(format!("vector name {name:?} given twice")));
            }
        }
        let mut offsets = Vec::with_capacity(spaces.len());
        let mut total = 0usize;
        for space in &spaces {
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
        for space in side.iter().filter_map(SideSpace::as_multi) {
            if space.dim == 0 || space.dim > max_dim {
                return Err(invalid(format!(
                    "`{}.size` = {}: must be 1 to {max_dim}",
                    space.name, space.dim
                )));
            }
        }
        Ok(VectorSpaces {
            spaces,
            offsets,
            side,
            named: true,
        })
    }

    /// Whether the collection was made with a map of vectors (dense, sparse, or none)
    /// rather than one unnamed vector.
    pub fn is_named(&self) -> bool {
        self.named
    }

    /// The side vectors (sparse vectors and multivectors), numbered as a point's `side`
    /// list.
    pub fn side(&self) -> &[SideSpace] {
        &self.side
    }

    /// The number of the side space called `name`.
    pub fn side_index_of(&self, name: &str) -> Option<usize> {
        self.side.iter().position(|space| space.name() == name)
    }

    /// The number of the sparse space called `name` (its side-space number).
    pub fn sparse_index_of(&self, name: &str) -> Option<usize> {
        self.side_index_of(name)
            .filter(|index| self.side[*index].as_sparse().is_some())
    }

    /// The number of the multivector space called `name` (its side-space number).
    pub fn multi_index_of(&self, name: &str) -> Option<usize> {
        self.side_index_of(name)
            .filter(|index| self.side[*index].as_multi().is_some())
    }

    /// The number of the vector called `name` among all of them, dense and side: a
    /// dense space's own number, a side one's [`VectorSpaces::side_number`].
    pub fn number_of(&self, name: &str) -> Option<usize> {
        self.index_of(name).or_else(|| {
            self.side_index_of(name)
                .map(|index| self.side_number(index))
        })
    }

    /// Side space `index`'s number among all vectors: after the dense ones.
    pub fn side_number(&self, index: usize) -> usize {
        self.spaces.len() + index
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
    /// then per space its distance code, u32 dimension and u16-length name; then a u32
    /// count of side spaces, per space a kind code (0 sparse, 1 sparse with IDF, 2
    /// multivector then its distance code and u32 row width) and its name; then a u8, 1
    /// when the collection was made with a map of vectors (0: one unnamed).
    pub(crate) fn encode_into(&self, out: &mut Writer) {
        out.len_u32(self.len(), "bounded space count");
        for space in &self.spaces {
            out.u8(space.distance.code())
                .len_u32(space.dim, "validated dim")
                .str_u16(&space.name, "bounded vector name");
        }
        out.len_u32(self.side.len(), "bounded space count");
        for space in &self.side {
            match space {
                SideSpace::Sparse(space) => out.u8(u8::from(space.idf)),
                SideSpace::Multi(space) => out
                    .u8(SIDE_MULTI)
                    .u8(space.distance.code())
                    .len_u32(space.dim, "validated dim"),
            };
            out.str_u16(space.name(), "bounded vector name");
        }
        out.u8(u8::from(self.named));
    }

    /// Reads what [`VectorSpaces::encode_into`] wrote (without the sparse part unless
    /// `with_sparse`: manifests before sparse vectors); `max_dim` as in
    /// [`VectorSpaces::new`].
    pub(crate) fn decode(
        reader: &mut Reader,
        max_dim: usize,
        with_sparse: bool,
    ) -> Result<VectorSpaces, DecodeError> {
        let at = reader.offset();
        let count = space_count(reader)?;
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
        let mut side = Vec::new();
        if with_sparse {
            for _ in 0..space_count(reader)? {
                side.push(decode_side(reader)?);
            }
        }
        let named = if with_sparse {
            reader.code("named", |code| (code <= 1).then_some(code == 1))?
        } else {
            !spaces.is_empty()
        };
        if !named {
            if !spaces.is_empty() || !side.is_empty() {
                return Err(Reader::invalid_at(
                    at,
                    "named",
                    "vectors listed for a collection with one unnamed vector".to_string(),
                ));
            }
            return Ok(VectorSpaces::default());
        }
        VectorSpaces::with_side(spaces, side, max_dim)
            .map_err(|error| Reader::invalid_at(at, "named vectors", error.to_string()))
    }
}

/// The kind code of a multivector side space.
const SIDE_MULTI: u8 = 2;

/// One side space as [`VectorSpaces::encode_into`] wrote it.
fn decode_side(reader: &mut Reader) -> Result<SideSpace, DecodeError> {
    let kind = reader.code("side vector kind", |code| {
        (code <= SIDE_MULTI).then_some(code)
    })?;
    let multi = if kind == SIDE_MULTI {
        let distance = reader.code("vector distance", Distance::from_code)?;
        Some((distance, reader.u32("vector dim")? as usize))
    } else {
        None
    };
    let name = reader.str_u16("vector name")?.to_string();
    Ok(match multi {
        Some((distance, dim)) => SideSpace::Multi(MultiSpace {
            name,
            dim,
            distance,
        }),
        None => SideSpace::Sparse(SparseSpace {
            name,
            idf: kind == 1,
        }),
    })
}

fn space_count(reader: &mut Reader) -> Result<usize, DecodeError> {
    let at = reader.offset();
    let count = reader.u32("space_count")? as usize;
    if count > MAX_SPACES {
        return Err(Reader::invalid_at(
            at,
            "space_count",
            format!("{count} named vectors, more than {MAX_SPACES}"),
        ));
    }
    Ok(count)
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

    /// `spaces` come back as they were from their manifest encoding.
    fn round_trip(spaces: &VectorSpaces) {
        let mut out = Writer::new();
        spaces.encode_into(&mut out);
        let bytes = out.into_bytes();
        let mut reader = Reader::new(&bytes);
        assert_eq!(
            &VectorSpaces::decode(&mut reader, 100, true).unwrap(),
            spaces
        );
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
        round_trip(&spaces);
        let with_sparse = VectorSpaces::with_sparse(
            vec![space("", 2, Distance::Dot)],
            vec![SparseSpace {
                name: "words".to_string(),
                idf: true,
            }],
            100,
        )
        .unwrap();
        assert_eq!(with_sparse.sparse_index_of("words"), Some(0));
        assert_eq!(with_sparse.number_of(""), Some(0));
        assert_eq!(with_sparse.number_of("words"), Some(1));
        assert_eq!(with_sparse.number_of("nope"), None);
        round_trip(&with_sparse);
        // an unnamed multivector alone, and one beside a sparse vector
        let multi = |name: &str| {
            SideSpace::Multi(MultiSpace {
                name: name.to_string(),
                dim: 7,
                distance: Distance::Euclid,
            })
        };
        let alone = VectorSpaces::with_side(vec![], vec![multi("")], 100).unwrap();
        assert_eq!(alone.multi_index_of(""), Some(0));
        assert_eq!(alone.sparse_index_of(""), None);
        let words = SideSpace::Sparse(SparseSpace {
            name: "words".to_string(),
            idf: false,
        });
        assert!(VectorSpaces::with_side(vec![], vec![multi(""), words.clone()], 100).is_err());
        let both = VectorSpaces::with_side(vec![], vec![words, multi("m")], 100).unwrap();
        round_trip(&alone);
        round_trip(&both);
        assert!(VectorSpaces::with_side(vec![], vec![multi("big")], 5).is_err());
    }

    #[test]
    fn bad_spaces_are_refused_naming_the_fault() {
        let error =
            |spaces: Vec<VectorSpace>| VectorSpaces::new(spaces, 10).unwrap_err().to_string();
        let payloads_only = VectorSpaces::new(vec![], 10).unwrap();
        assert!(payloads_only.is_named() && payloads_only.total_dim() == 0);
        assert!(!VectorSpaces::default().is_named());
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

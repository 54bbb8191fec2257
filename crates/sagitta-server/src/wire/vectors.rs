//! Vector values: a dense list, a multivector (a list of lists), a map of vector name
//! to vector, and the batch form's list of vectors. Deserialized straight into `Vec<f32>`, never through
//! `serde_json::Value` (a 10,000 × 768 batch would take ~250 MB as a `Value` tree).

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use sagitta_engine::{MultiVector, SideVector, SparseVector, VectorSpaces};

use super::DEFAULT_VECTOR_NAME;
use crate::error::{ApiError, ApiResult};

/// A vector field: a dense list, or a map of vector name to vector (checked against the
/// collection's named vectors by [`VectorInput::into_stored`]).
#[derive(Clone, Debug, PartialEq)]
pub enum VectorInput {
    Dense(Vec<f32>),
    /// A list of lists: the unnamed multivector's rows.
    Multi(Vec<Vec<f32>>),
    Named(Vec<(String, NamedVector)>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum NamedVector {
    Dense(Vec<f32>),
    /// `{"indices": [..], "values": [..]}`, checked and sorted.
    Sparse(SparseVector),
    /// A list of lists: a multivector's rows (checked against its space when stored).
    Multi(Vec<Vec<f32>>),
}

/// A list of numbers or a list of lists of numbers, told apart by the first element
/// (an empty list is a dense vector of size 0, refused by its size check).
#[derive(Clone, Debug, PartialEq)]
pub enum ListInput {
    Dense(Vec<f32>),
    Multi(Vec<Vec<f32>>),
}

/// The first element of a [`ListInput`]: a number or a row.
enum FirstElement {
    Number(f32),
    Row(Vec<f32>),
}

impl<'de> Deserialize<'de> for FirstElement {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<FirstElement, D::Error> {
        struct FirstVisitor;
        impl<'de> Visitor<'de> for FirstVisitor {
            type Value = FirstElement;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or a list of numbers")
            }
            #[allow(clippy::cast_possible_truncation)]
            fn visit_f64<E: de::Error>(self, value: f64) -> Result<FirstElement, E> {
                Ok(FirstElement::Number(value as f32))
            }
            #[allow(clippy::cast_precision_loss)]
            fn visit_i64<E: de::Error>(self, value: i64) -> Result<FirstElement, E> {
                Ok(FirstElement::Number(value as f32))
            }
            #[allow(clippy::cast_precision_loss)]
            fn visit_u64<E: de::Error>(self, value: u64) -> Result<FirstElement, E> {
                Ok(FirstElement::Number(value as f32))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<FirstElement, A::Error> {
                DenseVisitor.visit_seq(seq).map(FirstElement::Row)
            }
        }
        deserializer.deserialize_any(FirstVisitor)
    }
}

/// A [`ListInput`] from a list's elements: numbers straight into `Vec<f32>` as
/// [`DenseVisitor`] does, or rows of them.
pub(super) fn list_input<'de, A: SeqAccess<'de>>(mut seq: A) -> Result<ListInput, A::Error> {
    let hint = seq.size_hint().unwrap_or(0).min(1 << 16);
    match seq.next_element::<FirstElement>()? {
        None => Ok(ListInput::Dense(Vec::new())),
        Some(FirstElement::Number(first)) => {
            let mut values = Vec::with_capacity(hint.max(1));
            values.push(first);
            while let Some(value) = seq.next_element::<f32>()? {
                values.push(value);
            }
            Ok(ListInput::Dense(values))
        }
        Some(FirstElement::Row(first)) => {
            let mut rows = vec![first];
            while let Some(row) = seq.next_element::<Vec<f32>>()? {
                rows.push(row);
            }
            Ok(ListInput::Multi(rows))
        }
    }
}

/// A multivector from its rows, or an error naming `field` and the fault.
pub fn multi_vector(rows: &[Vec<f32>], field: &str) -> ApiResult<MultiVector> {
    MultiVector::new(rows).map_err(|reason| {
        ApiError::bad_request(format!("Wrong input: `{field}`: multivector: {reason}"))
    })
}

/// The rest of a sparse vector's map once its first key `first` was read: `indices` and
/// `values`, nothing else, made into a checked [`SparseVector`].
pub(super) fn sparse_from_map<'de, A: MapAccess<'de>>(
    first: &str,
    mut map: A,
) -> Result<SparseVector, A::Error> {
    let (mut indices, mut values): (Option<Vec<u32>>, Option<Vec<f32>>) = (None, None);
    let mut key = Some(first.to_string());
    while let Some(name) = key {
        match name.as_str() {
            "indices" => indices = Some(map.next_value()?),
            "values" => values = Some(map.next_value()?),
            other => {
                return Err(de::Error::custom(format!(
                    "unknown field `{other}` of a sparse vector, expected `indices` and `values`"
                )))
            }
        }
        key = map.next_key::<String>()?;
    }
    let indices = indices.ok_or_else(|| de::Error::missing_field("indices"))?;
    let values = values.ok_or_else(|| de::Error::missing_field("values"))?;
    SparseVector::new(indices, values)
        .map_err(|reason| de::Error::custom(format!("sparse vector: {reason}")))
}

/// A dense vector: a list of numbers, read straight into `Vec<f32>`.
pub(super) struct DenseVisitor;

impl<'de> Visitor<'de> for DenseVisitor {
    type Value = Vec<f32>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of numbers")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<f32>, A::Error> {
        let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
        while let Some(value) = seq.next_element::<f32>()? {
            values.push(value);
        }
        Ok(values)
    }
}

impl<'de> Deserialize<'de> for NamedVector {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<NamedVector, D::Error> {
        struct NamedVisitor;
        impl<'de> Visitor<'de> for NamedVisitor {
            type Value = NamedVector;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of numbers, a list of lists or a sparse vector")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<NamedVector, A::Error> {
                Ok(match list_input(seq)? {
                    ListInput::Dense(values) => NamedVector::Dense(values),
                    ListInput::Multi(rows) => NamedVector::Multi(rows),
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NamedVector, A::Error> {
                let Some(first) = map.next_key::<String>()? else {
                    return Err(de::Error::custom(
                        "an empty map: a sparse vector needs `indices` and `values`",
                    ));
                };
                sparse_from_map(&first, map).map(NamedVector::Sparse)
            }
        }
        deserializer.deserialize_any(NamedVisitor)
    }
}

impl<'de> Deserialize<'de> for VectorInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<VectorInput, D::Error> {
        struct VectorVisitor;
        impl<'de> Visitor<'de> for VectorVisitor {
            type Value = VectorInput;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of numbers, or a map of vector name to vector")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<VectorInput, A::Error> {
                Ok(match list_input(seq)? {
                    ListInput::Dense(values) => VectorInput::Dense(values),
                    ListInput::Multi(rows) => VectorInput::Multi(rows),
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<VectorInput, A::Error> {
                let mut named = Vec::new();
                while let Some((name, vector)) = map.next_entry::<String, NamedVector>()? {
                    named.push((name, vector));
                }
                Ok(VectorInput::Named(named))
            }
        }
        deserializer.deserialize_any(VectorVisitor)
    }
}

/// A named vector's values, checked against its size.
fn sized(values: Vec<f32>, dim: usize, field: &str) -> ApiResult<Vec<f32>> {
    if values.len() != dim {
        return Err(ApiError::bad_request(format!(
            "Wrong input: Vector dimension error: expected dim: {dim}, got {} (`{field}`)",
            values.len()
        )));
    }
    Ok(values)
}

fn not_dense(field: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Wrong input: `{field}`: a dense vector is expected here; send a list of numbers"
    ))
}

fn not_sparse(field: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Wrong input: `{field}` is a sparse vector; send {{\"indices\": [..], \"values\": [..]}}"
    ))
}

fn not_multi(field: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Wrong input: `{field}` is a multivector; send a list of rows (lists of numbers)"
    ))
}

/// A point's stored dense vector and its side vectors (see [`sagitta_engine::Point`]).
pub type StoredVectors = (Vec<f32>, Vec<Option<SideVector>>);

impl VectorInput {
    /// The vectors as the collection stores them: the unnamed one (none for `{}`: the
    /// engine stores a point without it as NaNs), or with named vectors
    /// `spaces` each dense one in its place and NaNs for those not given
    /// ([`sagitta_engine::spaces`]), and one entry per sparse vector. Errors name `field`.
    pub fn into_stored(self, field: &str, spaces: &VectorSpaces) -> ApiResult<StoredVectors> {
        if !spaces.is_named() {
            // `{}`: a point without its vector (stored as NaNs, found by no search)
            if matches!(&self, VectorInput::Named(named) if named.is_empty()) {
                return Ok((Vec::new(), Vec::new()));
            }
            return Ok((self.into_default(field)?, Vec::new()));
        }
        let named = match self {
            VectorInput::Dense(values) if spaces.index_of(DEFAULT_VECTOR_NAME).is_some() => {
                vec![(DEFAULT_VECTOR_NAME.to_string(), NamedVector::Dense(values))]
            }
            VectorInput::Multi(rows) if spaces.multi_index_of(DEFAULT_VECTOR_NAME).is_some() => {
                vec![(DEFAULT_VECTOR_NAME.to_string(), NamedVector::Multi(rows))]
            }
            VectorInput::Dense(_) | VectorInput::Multi(_) => {
                return Err(ApiError::bad_request(format!(
                    "Wrong input: `{field}`: the collection has named vectors; send a map of \
                     vector name to vector. Not existing vector name error: "
                )))
            }
            VectorInput::Named(named) => named,
        };
        let mut parts: Vec<Option<Vec<f32>>> = vec![None; spaces.len()];
        let mut side = vec![None; spaces.side().len()];
        for (name, vector) in named {
            let at = format!("{field}.{name}");
            if let Some(index) = spaces.index_of(&name) {
                let NamedVector::Dense(values) = vector else {
                    return Err(not_dense(&at));
                };
                let dim = spaces.get(index).map_or(0, |space| space.dim);
                parts[index] = Some(sized(values, dim, &at)?);
                continue;
            }
            let index = spaces
                .side_index_of(&name)
                .ok_or_else(|| unknown_vector_name(field, &name))?;
            side[index] = Some(side_vector(spaces, index, vector, &at)?);
        }
        let views: Vec<Option<&[f32]>> = parts.iter().map(Option::as_deref).collect();
        Ok((spaces.join(&views), side))
    }

    /// The default vector, or an error naming `field` and what was wrong.
    pub fn into_default(self, field: &str) -> ApiResult<Vec<f32>> {
        // the engine reads an empty vector as "no vector": `[]` is refused, `{}` means that
        let empty = || {
            ApiError::bad_request(format!(
                "Wrong input: Vector dimension error: `{field}` is empty (`{{}}` is a point \
                 without its vector)"
            ))
        };
        match self {
            VectorInput::Dense(values) if values.is_empty() => Err(empty()),
            VectorInput::Dense(values) => Ok(values),
            VectorInput::Multi(_) => Err(not_dense(field)),
            VectorInput::Named(named) => {
                let mut found = None;
                for (name, vector) in named {
                    if name != DEFAULT_VECTOR_NAME {
                        return Err(unknown_vector_name(field, &name));
                    }
                    match vector {
                        NamedVector::Dense(values) if values.is_empty() => return Err(empty()),
                        NamedVector::Dense(values) => found = Some(values),
                        NamedVector::Sparse(_) | NamedVector::Multi(_) => {
                            return Err(not_dense(field))
                        }
                    }
                }
                found.ok_or_else(|| {
                    ApiError::bad_request(format!("Wrong input: `{field}`: no vector given"))
                })
            }
        }
    }
}

/// `vector` given for side space `index` (a sparse vector's or a multivector's), checked
/// to be of its kind and, for a multivector, of its row width; errors name `field`.
fn side_vector(
    spaces: &VectorSpaces,
    index: usize,
    vector: NamedVector,
    field: &str,
) -> ApiResult<SideVector> {
    match (&spaces.side()[index], vector) {
        (sagitta_engine::SideSpace::Sparse(_), NamedVector::Sparse(vector)) => {
            Ok(SideVector::Sparse(vector))
        }
        (sagitta_engine::SideSpace::Multi(space), NamedVector::Multi(rows)) => {
            let multi = multi_vector(&rows, field)?;
            if multi.dim() != space.dim {
                return Err(ApiError::bad_request(format!(
                    "Wrong input: Vector dimension error: expected dim: {}, got {} (`{field}`)",
                    space.dim,
                    multi.dim()
                )));
            }
            Ok(SideVector::Multi(multi))
        }
        (sagitta_engine::SideSpace::Sparse(_), _) => Err(not_sparse(field)),
        (sagitta_engine::SideSpace::Multi(_), _) => Err(not_multi(field)),
    }
}

pub fn unknown_vector_name(field: &str, name: &str) -> ApiError {
    ApiError::bad_request(format!(
        "Wrong input: Not existing vector name error: {name} (`{field}`)"
    ))
}

/// `vectors` of the batch form: a list of vectors, or a map of vector name to such a list.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchVectors {
    Dense(Vec<Vec<f32>>),
    /// A list of the unnamed multivector's values (each a list of rows).
    Multi(Vec<Vec<Vec<f32>>>),
    Named(Vec<(String, Vec<NamedVector>)>),
}

impl BatchVectors {
    /// The `rows` stored vectors (see [`VectorInput::into_stored`]); each named list must
    /// hold one vector per id.
    pub fn into_rows(self, rows: usize, spaces: &VectorSpaces) -> ApiResult<Vec<StoredVectors>> {
        let count_error = |field: &str, count: usize| {
            ApiError::bad_request(format!(
                "Wrong input: `{field}` has {count} vectors for {rows} ids"
            ))
        };
        let named = match self {
            BatchVectors::Dense(vectors) if vectors.len() != rows => {
                return Err(count_error("batch.vectors", vectors.len()));
            }
            // the common bulk form: rows as they came, nothing per row to build
            BatchVectors::Dense(vectors) if !spaces.is_named() => {
                if let Some(row) = vectors.iter().position(Vec::is_empty) {
                    return Err(ApiError::bad_request(format!(
                        "Wrong input: Vector dimension error: `batch.vectors[{row}]` is empty"
                    )));
                }
                return Ok(vectors.into_iter().map(|row| (row, Vec::new())).collect());
            }
            BatchVectors::Dense(vectors) => {
                let column = vectors.into_iter().map(NamedVector::Dense).collect();
                vec![(DEFAULT_VECTOR_NAME.to_string(), column)]
            }
            BatchVectors::Multi(vectors) => {
                let column = vectors.into_iter().map(NamedVector::Multi).collect();
                vec![(DEFAULT_VECTOR_NAME.to_string(), column)]
            }
            BatchVectors::Named(named) => named,
        };
        let mut points: Vec<VectorInput> = vec![VectorInput::Named(Vec::new()); rows];
        let mut given = false;
        for (name, vectors) in named {
            if vectors.len() != rows {
                return Err(count_error(&format!("batch.vectors.{name}"), vectors.len()));
            }
            given = true;
            for (point, vector) in points.iter_mut().zip(vectors) {
                if let VectorInput::Named(parts) = point {
                    parts.push((name.clone(), vector));
                }
            }
        }
        if !given && !spaces.is_named() {
            return Err(ApiError::bad_request(
                "Wrong input: `batch.vectors`: no vectors given",
            ));
        }
        points
            .into_iter()
            .enumerate()
            .map(|(row, point)| point.into_stored(&format!("batch.vectors[{row}]"), spaces))
            .collect()
    }
}

impl<'de> Deserialize<'de> for BatchVectors {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<BatchVectors, D::Error> {
        #[derive(Deserialize)]
        struct Dense(#[serde(deserialize_with = "dense")] Vec<f32>);
        fn dense<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<f32>, D::Error> {
            deserializer.deserialize_seq(DenseVisitor)
        }
        #[derive(Deserialize)]
        struct Multi(Vec<Vec<f32>>);
        struct Listed(ListInput);
        impl<'de> Deserialize<'de> for Listed {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Listed, D::Error> {
                struct ListedVisitor;
                impl<'de> Visitor<'de> for ListedVisitor {
                    type Value = Listed;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str("a vector: a list of numbers or of rows")
                    }
                    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Listed, A::Error> {
                        list_input(seq).map(Listed)
                    }
                }
                deserializer.deserialize_seq(ListedVisitor)
            }
        }
        struct BatchVisitor;
        impl<'de> Visitor<'de> for BatchVisitor {
            type Value = BatchVectors;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of vectors, or a map of vector name to a list of vectors")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<BatchVectors, A::Error> {
                let mut rows = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 16));
                // the first value tells a list of dense vectors from one of multivectors
                match seq.next_element::<Listed>()? {
                    None => return Ok(BatchVectors::Dense(rows)),
                    Some(Listed(ListInput::Dense(first))) => rows.push(first),
                    Some(Listed(ListInput::Multi(first))) => {
                        let mut values = vec![first];
                        while let Some(Multi(value)) = seq.next_element::<Multi>()? {
                            values.push(value);
                        }
                        return Ok(BatchVectors::Multi(values));
                    }
                }
                while let Some(Dense(row)) = seq.next_element::<Dense>()? {
                    rows.push(row);
                }
                Ok(BatchVectors::Dense(rows))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<BatchVectors, A::Error> {
                let mut named = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    named.push((name, map.next_value::<Vec<NamedVector>>()?));
                }
                Ok(BatchVectors::Named(named))
            }
        }
        deserializer.deserialize_any(BatchVisitor)
    }
}

//! Values between Python and the engine: point ids, filters, rows of vectors, points
//! (with payloads and sparse vectors), hits. Errors name the argument and the row.

use numpy::{PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use sagitta_engine::point::parse_uuid;
use sagitta_engine::{
    Filter, Point, PointId, ScoredPoint, SideVector, SparseSpace, SparseVector, VectorSpaces,
};

use crate::{DimensionError, InvalidParameterError};

/// An id from Python: a non-negative int, a `uuid.UUID`, or UUID text in the forms the
/// server accepts ([`parse_uuid`]; Python's `uuid.UUID(str)` would also take a sign or
/// braces around simple hex, which Qdrant refuses).
pub(crate) fn point_id(value: &Bound<'_, PyAny>) -> PyResult<PointId> {
    if let Ok(number) = value.extract::<u64>() {
        return Ok(PointId::Number(number));
    }
    let uuid = value.py().import("uuid")?.getattr("UUID")?;
    if value.is_instance(&uuid)? {
        return Ok(PointId::Uuid(value.getattr("int")?.extract()?));
    }
    let text: String = value.extract().map_err(|_| {
        InvalidParameterError::new_err(format!(
            "`ids`: {value} is neither an unsigned 64-bit integer nor a UUID"
        ))
    })?;
    parse_uuid(&text).map(PointId::Uuid).ok_or_else(|| {
        InvalidParameterError::new_err(format!("`ids`: {text:?} is not a valid UUID"))
    })
}

/// A filter from a Python dict in Qdrant's grammar (`None` = no filter).
pub(crate) fn parse_filter(filter: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Filter>> {
    let Some(filter) = filter.filter(|f| !f.is_none()) else {
        return Ok(None);
    };
    let text: String = filter
        .py()
        .import("json")?
        .call_method1("dumps", (filter,))
        .map_err(|_| InvalidParameterError::new_err("`filter` is not JSON-serializable"))?
        .extract()?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|error| InvalidParameterError::new_err(format!("`filter`: {error}")))?;
    // a filter error is always the engine's `InvalidFilter`: an invalid parameter
    Filter::parse(&value, "filter")
        .map(Some)
        .map_err(|error| InvalidParameterError::new_err(error.to_string()))
}

pub(crate) fn id_to_python(py: Python<'_>, id: PointId) -> PyResult<PyObject> {
    Ok(match id {
        PointId::Number(number) => number.into_pyobject(py)?.into_any().unbind(),
        PointId::Uuid(_) => id.to_string().into_pyobject(py)?.into_any().unbind(),
    })
}

pub(crate) fn point_dict<'py>(
    py: Python<'py>,
    id: PointId,
    score: Option<f32>,
    payload: Option<String>,
    vector: Option<Vec<f32>>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("id", id_to_python(py, id)?)?;
    if let Some(score) = score {
        dict.set_item("score", score)?;
    }
    let json = py.import("json")?;
    let payload = match payload {
        Some(text) => json.call_method1("loads", (text,))?.unbind(),
        None => py.None(),
    };
    dict.set_item("payload", payload)?;
    if let Some(vector) = vector {
        // a point without its vector (NaNs in storage) shows None
        let present = !sagitta_engine::spaces::is_absent(&vector);
        dict.set_item("vector", present.then_some(vector))?;
    }
    Ok(dict)
}

/// Ids and vectors from Python: the vectors as one C-contiguous float32 array of rows
/// (a float32 array, memory-mapped or not, is borrowed as it is, not copied).
pub(crate) fn rows_from_python<'py>(
    py: Python<'py>,
    ids: &Bound<'py, PyAny>,
    vectors: &Bound<'py, PyAny>,
    dim: usize,
) -> PyResult<(Vec<PointId>, PyReadonlyArrayDyn<'py, f32>)> {
    let numpy = py.import("numpy")?;
    let array: PyReadonlyArrayDyn<'py, f32> = numpy
        .call_method1("ascontiguousarray", (vectors, "float32"))?
        .call_method1("reshape", (-1_i64, dim as i64))
        .map_err(|_| {
            DimensionError::new_err(format!(
                "vector dimension error: `vectors` cannot be shaped as n × {}",
                dim
            ))
        })?
        .extract()?;
    let rows = array.shape()[0];
    let ids: Vec<PointId> = ids
        .try_iter()?
        .map(|id| point_id(&id?))
        .collect::<PyResult<_>>()?;
    if ids.len() != rows {
        return Err(DimensionError::new_err(format!(
            "`ids` has {} entries but {rows} vectors were given",
            ids.len()
        )));
    }
    // The engine takes a row of NaNs as a point without its vector (Qdrant's `vector: {}`);
    // this API has no such point, so a NaN is an error here, as in `sagittadb.connect`.
    if let Some(at) = array
        .as_slice()?
        .iter()
        .position(|value| !value.is_finite())
    {
        return Err(InvalidParameterError::new_err(format!(
            "`vectors` row {} has a non-finite value (NaN or Inf) at position {}",
            at / dim,
            at % dim
        )));
    }
    Ok((ids, array))
}

/// Points from Python ids, vectors and optional payloads (JSON objects).
pub(crate) fn points_from_python(
    py: Python<'_>,
    ids: &Bound<'_, PyAny>,
    vectors: &Bound<'_, PyAny>,
    payloads: Option<&Bound<'_, PyAny>>,
    dim: usize,
) -> PyResult<Vec<Point>> {
    let (ids, array) = rows_from_python(py, ids, vectors, dim)?;
    let values = array.as_slice()?;
    let rows = ids.len();
    let json = py.import("json")?;
    let payloads: Vec<Option<String>> = match payloads {
        None => vec![None; rows],
        Some(payloads) => payloads
            .try_iter()?
            .map(|payload| {
                let payload = payload?;
                if payload.is_none() {
                    Ok(None)
                } else {
                    Ok(Some(
                        json.call_method1("dumps", (payload,))?
                            .extract::<String>()?,
                    ))
                }
            })
            .collect::<PyResult<_>>()?,
    };
    if payloads.len() != rows {
        return Err(DimensionError::new_err(format!(
            "`payloads` has {} entries but {rows} vectors were given",
            payloads.len()
        )));
    }
    let points: Vec<Point> = ids
        .into_iter()
        .zip(payloads)
        .enumerate()
        .map(|(row, (id, payload))| Point {
            id,
            vector: values[row * dim..(row + 1) * dim].to_vec(),
            payload,
            side: Vec::new(),
        })
        .collect();
    Ok(points)
}

/// Query rows from a 1-d (one query) or, with `many`, 2-d array of `dim` columns.
pub(crate) fn query_rows(
    query: &Bound<'_, PyAny>,
    dim: usize,
    many: bool,
) -> PyResult<Vec<Vec<f32>>> {
    let numpy = query.py().import("numpy")?;
    let array: PyReadonlyArrayDyn<'_, f32> = numpy
        .call_method1("ascontiguousarray", (query, "float32"))?
        .extract()?;
    let shape = array.shape().to_vec();
    let rows = match (shape.as_slice(), many) {
        ([_], false) => 1,
        ([rows, _], true) => *rows,
        _ => {
            return Err(DimensionError::new_err(format!(
                "vector dimension error: `query` must be {}, got shape {shape:?}",
                if many { "n × dim" } else { "a 1-d vector" }
            )))
        }
    };
    let values = array.as_slice()?;
    if values.len() != rows * dim {
        return Err(DimensionError::new_err(format!(
            "vector dimension error: `query` has {} columns, the collection has dim {dim}",
            values.len() / rows.max(1)
        )));
    }
    Ok(values.chunks_exact(dim).map(<[f32]>::to_vec).collect())
}

pub(crate) fn payload_text(payload: &Bound<'_, PyAny>) -> PyResult<String> {
    payload
        .py()
        .import("json")?
        .call_method1("dumps", (payload,))
        .map_err(|_| InvalidParameterError::new_err("`payload` is not JSON-serializable"))?
        .extract()
}

/// Hits as dicts; `vectors`: with their vectors, of a collection of these spaces.
pub(crate) fn hits_to_list<'py>(
    py: Python<'py>,
    hits: Vec<ScoredPoint>,
    with_payload: bool,
    vectors: Option<&VectorSpaces>,
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for hit in hits {
        let dict = point_dict(
            py,
            hit.id,
            Some(hit.score),
            hit.payload.filter(|_| with_payload),
            vectors.is_some().then_some(hit.vector),
        )?;
        if let Some(spaces) = vectors {
            add_sparse(&dict, &hit.side, spaces)?;
        }
        list.append(dict)?;
    }
    Ok(list)
}

/// Sets `sparse` in a point's dict, `{name: {"indices", "values"}}` of the sparse vectors
/// it has, when its collection has sparse vectors (`spaces`); else leaves it out.
pub(crate) fn add_sparse(
    dict: &Bound<'_, PyDict>,
    side: &[Option<SideVector>],
    spaces: &VectorSpaces,
) -> PyResult<()> {
    let py = dict.py();
    let mut sparse = None;
    for (index, space) in spaces.side().iter().enumerate() {
        let Some(space) = space.as_sparse() else {
            continue;
        };
        let map = sparse.get_or_insert_with(|| PyDict::new(py));
        let vector = side.get(index).and_then(Option::as_ref);
        if let Some(vector) = vector.and_then(SideVector::as_sparse) {
            let entry = PyDict::new(py);
            entry.set_item("indices", vector.indices())?;
            entry.set_item("values", vector.values())?;
            map.set_item(&space.name, entry)?;
        }
    }
    match sparse {
        Some(map) => dict.set_item("sparse", map),
        None => Ok(()),
    }
}

/// A sparse vector from Python: `{"indices": [...], "values": [...]}`, an object with
/// `indices` and `values` (qdrant-client's `SparseVector`), or an `(indices, values)`
/// pair. `field` names it in errors.
pub(crate) fn sparse_vector(value: &Bound<'_, PyAny>, field: &str) -> PyResult<SparseVector> {
    let invalid = |part: &str, reason: &str| {
        InvalidParameterError::new_err(format!("`{field}{part}`: {reason}"))
    };
    let parts = if let Ok(dict) = value.downcast::<PyDict>() {
        dict.get_item("indices")?.zip(dict.get_item("values")?)
    } else if value.hasattr("indices")? && value.hasattr("values")? {
        Some((value.getattr("indices")?, value.getattr("values")?))
    } else {
        value.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>().ok()
    };
    let (indices, values) = parts.ok_or_else(|| {
        invalid(
            "",
            "expected {\"indices\": [...], \"values\": [...]} or an (indices, values) pair",
        )
    })?;
    let indices: Vec<u32> = indices
        .extract()
        .map_err(|_| invalid(".indices", "expected integers 0 to 4294967295"))?;
    let values: Vec<f32> = values
        .extract()
        .map_err(|_| invalid(".values", "expected numbers"))?;
    SparseVector::new(indices, values).map_err(|reason| invalid("", &reason))
}

/// The sparse vectors of a new collection: `{name: {"modifier": "idf" | "none"}}` (an
/// empty dict or None: no modifier).
pub(crate) fn sparse_spaces(config: &Bound<'_, PyAny>) -> PyResult<Vec<SparseSpace>> {
    let config = config.downcast::<PyDict>().map_err(|_| {
        InvalidParameterError::new_err(
            "`sparse_vectors`: expected a dict {name: {\"modifier\": ..}}",
        )
    })?;
    let mut spaces = Vec::with_capacity(config.len());
    for (name, params) in config.iter() {
        let name: String = name.extract().map_err(|_| {
            InvalidParameterError::new_err("`sparse_vectors`: names must be strings")
        })?;
        let field = format!("sparse_vectors[{name:?}]");
        let modifier = if params.is_none() {
            None
        } else {
            let params = params.downcast::<PyDict>().map_err(|_| {
                InvalidParameterError::new_err(format!("`{field}`: expected a dict"))
            })?;
            if let Some(key) = params.keys().iter().find(|key| {
                key.extract::<String>()
                    .map_or(true, |key| key != "modifier")
            }) {
                return Err(InvalidParameterError::new_err(format!(
                    "`{field}`: unknown setting {key}; the one setting is \"modifier\""
                )));
            }
            params
                .get_item("modifier")?
                .filter(|value| !value.is_none())
                .map(|value| value.extract::<String>())
                .transpose()?
        };
        let idf = SparseSpace::idf_of_modifier(modifier.as_deref()).ok_or_else(|| {
            InvalidParameterError::new_err(format!(
                "`{field}.modifier` = {:?}: expected \"idf\" or \"none\"",
                modifier.unwrap_or_default()
            ))
        })?;
        spaces.push(SparseSpace { name, idf });
    }
    Ok(spaces)
}

/// Sets the points' sparse vectors from `sparse`: `{name: one sparse vector (or None)
/// per point}`, each name a sparse vector of the collection's `spaces`.
pub(crate) fn attach_sparse(
    points: &mut [Point],
    sparse: &Bound<'_, PyAny>,
    spaces: &VectorSpaces,
) -> PyResult<()> {
    let sparse = sparse.downcast::<PyDict>().map_err(|_| {
        InvalidParameterError::new_err(
            "`sparse`: expected a dict {name: [one sparse vector per point]}",
        )
    })?;
    for (name, rows) in sparse.iter() {
        let name: String = name
            .extract()
            .map_err(|_| InvalidParameterError::new_err("`sparse`: names must be strings"))?;
        let index = spaces.sparse_index_of(&name).ok_or_else(|| {
            InvalidParameterError::new_err(format!(
                "`sparse`: the collection has no sparse vector {name:?}"
            ))
        })?;
        let rows: Vec<Bound<'_, PyAny>> = rows.try_iter()?.collect::<PyResult<_>>()?;
        if rows.len() != points.len() {
            return Err(DimensionError::new_err(format!(
                "`sparse[{name:?}]` has {} entries but {} points were given",
                rows.len(),
                points.len()
            )));
        }
        for (row, (point, value)) in points.iter_mut().zip(rows).enumerate() {
            if value.is_none() {
                continue;
            }
            let vector = sparse_vector(&value, &format!("sparse[{name:?}][{row}]"))?;
            point.side.resize(spaces.side().len(), None);
            point.side[index] = Some(SideVector::Sparse(vector));
        }
    }
    Ok(())
}

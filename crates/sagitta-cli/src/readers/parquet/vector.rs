//! The vector column: list, large_list or fixed_size_list of float32 (float64 and float16
//! converted). Values are read straight from the flat child array through the offsets, with
//! no per-row Arrow allocation.

use std::ops::Range;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float16Type, Float32Type, Float64Type};
use arrow_array::{Array, Float16Array, Float32Array, Float64Array};
use arrow_schema::DataType;

use crate::readers::{first_non_finite, non_finite_reason};

/// Checks the column type; returns the dimension when the type fixes it.
pub(super) fn check_type(data_type: &DataType) -> Result<Option<usize>, String> {
    let (element, fixed_dim) = match data_type {
        DataType::List(field) | DataType::LargeList(field) => (field.data_type(), None),
        DataType::FixedSizeList(field, size) => {
            let size = usize::try_from(*size).map_err(|_| format!("list size {size}"))?;
            (field.data_type(), Some(size))
        }
        other => {
            return Err(format!(
                "type {other} is not a list of float32 (or float64, float16)"
            ))
        }
    };
    match element {
        DataType::Float16 | DataType::Float32 | DataType::Float64 => Ok(fixed_dim),
        other => Err(format!(
            "list element type {other} is not float32 (or float64, float16)"
        )),
    }
}

/// Where each row's values are in the child array.
enum ListRanges<'a> {
    Offsets32(&'a [i32]),
    Offsets64(&'a [i64]),
    Fixed(usize),
}

impl ListRanges<'_> {
    #[allow(clippy::cast_sign_loss)] // Arrow validates offsets as non-negative.
    fn range(&self, index: usize) -> Range<usize> {
        match self {
            ListRanges::Offsets32(offsets) => offsets[index] as usize..offsets[index + 1] as usize,
            ListRanges::Offsets64(offsets) => offsets[index] as usize..offsets[index + 1] as usize,
            ListRanges::Fixed(size) => index * size..(index + 1) * size,
        }
    }
}

/// The child array of floats.
enum FloatValues<'a> {
    Float16(&'a Float16Array),
    Float32(&'a Float32Array),
    Float64(&'a Float64Array),
}

impl FloatValues<'_> {
    fn new(array: &dyn Array) -> Result<FloatValues<'_>, String> {
        match array.data_type() {
            DataType::Float16 => Ok(FloatValues::Float16(array.as_primitive::<Float16Type>())),
            DataType::Float32 => Ok(FloatValues::Float32(array.as_primitive::<Float32Type>())),
            DataType::Float64 => Ok(FloatValues::Float64(array.as_primitive::<Float64Type>())),
            other => Err(format!("list element type {other} is not a float")),
        }
    }

    fn child(&self) -> &dyn Array {
        match self {
            FloatValues::Float16(array) => *array,
            FloatValues::Float32(array) => *array,
            FloatValues::Float64(array) => *array,
        }
    }

    /// f64 beyond the f32 range becomes ±inf, which the finiteness check rejects.
    #[allow(clippy::cast_possible_truncation)]
    fn to_f32(&self, range: Range<usize>) -> Vec<f32> {
        match self {
            FloatValues::Float16(array) => {
                array.values()[range].iter().map(|v| v.to_f32()).collect()
            }
            FloatValues::Float32(array) => array.values()[range].to_vec(),
            FloatValues::Float64(array) => {
                array.values()[range].iter().map(|v| *v as f32).collect()
            }
        }
    }
}

/// The vector column of one record batch.
pub(super) struct VectorColumn<'a> {
    column: &'a dyn Array,
    ranges: ListRanges<'a>,
    values: FloatValues<'a>,
}

impl<'a> VectorColumn<'a> {
    pub(super) fn new(column: &'a dyn Array) -> Result<VectorColumn<'a>, String> {
        let (ranges, child) = match column.data_type() {
            DataType::List(_) => {
                let list = column.as_list::<i32>();
                (ListRanges::Offsets32(list.value_offsets()), list.values())
            }
            DataType::LargeList(_) => {
                let list = column.as_list::<i64>();
                (ListRanges::Offsets64(list.value_offsets()), list.values())
            }
            DataType::FixedSizeList(_, size) => {
                let list = column.as_fixed_size_list();
                let size = usize::try_from(*size).map_err(|_| format!("list size {size}"))?;
                (ListRanges::Fixed(size), list.values())
            }
            other => return Err(format!("type {other} is not a list of floats")),
        };
        Ok(VectorColumn {
            column,
            ranges,
            values: FloatValues::new(child.as_ref())?,
        })
    }

    /// The vector in row `index` of the batch: not null, no null or non-finite value.
    pub(super) fn vector(&self, index: usize) -> Result<Vec<f32>, String> {
        if self.column.is_null(index) {
            return Err("vector is null".into());
        }
        let range = self.ranges.range(index);
        let child = self.values.child();
        if child.null_count() > 0 {
            if let Some(position) = range.clone().position(|i| child.is_null(i)) {
                return Err(format!("value {position} is null"));
            }
        }
        let vector = self.values.to_f32(range);
        if let Some((position, value)) = first_non_finite(&vector) {
            return Err(non_finite_reason(position, value));
        }
        Ok(vector)
    }
}

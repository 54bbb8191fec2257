//! Payload columns: each non-id, non-vector column is a key of the point's JSON payload.
//!
//! Supported: null, boolean, signed and unsigned integers, float16/32/64, strings (utf8,
//! large_utf8, utf8_view), dictionary-encoded values of these (pandas categoricals), lists
//! of supported types and structs (JSON objects). A null is JSON `null`. A float NaN is
//! `null` too (pandas writes missing floats as NaN); ±Inf has no JSON form and is an error.
//! float32 and float16 values are written in their shortest decimal form (0.1, not
//! 0.10000000149011612).

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type,
    UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrowPrimitiveType, StructArray};
use arrow_schema::DataType;
use serde_json::{Map, Number, Value};

/// Checks that every value of the type has a JSON form.
pub(super) fn check_type(data_type: &DataType) -> Result<(), String> {
    if is_supported(data_type) {
        Ok(())
    } else {
        Err(format!(
            "type {data_type} cannot be a payload value (supported: strings, integers, \
             floats, booleans, nulls, and lists and structs of these)"
        ))
    }
}

fn is_supported(data_type: &DataType) -> bool {
    match data_type {
        DataType::Null
        | DataType::Boolean
        | DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Float16
        | DataType::Float32
        | DataType::Float64
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View => true,
        DataType::List(field) | DataType::LargeList(field) | DataType::FixedSizeList(field, _) => {
            is_supported(field.data_type())
        }
        DataType::Struct(fields) => fields.iter().all(|field| is_supported(field.data_type())),
        DataType::Dictionary(key, value) => key.is_integer() && is_supported(value),
        _ => false,
    }
}

/// The JSON form of element `index` of `array` (whose type passed [`check_type`]).
pub(super) fn json_value(array: &dyn Array, index: usize) -> Result<Value, String> {
    if array.is_null(index) {
        return Ok(Value::Null);
    }
    let value = match array.data_type() {
        DataType::Null => Value::Null,
        DataType::Boolean => Value::Bool(array.as_boolean().value(index)),
        DataType::Int8 => Value::from(array.as_primitive::<Int8Type>().value(index)),
        DataType::Int16 => Value::from(array.as_primitive::<Int16Type>().value(index)),
        DataType::Int32 => Value::from(array.as_primitive::<Int32Type>().value(index)),
        DataType::Int64 => Value::from(array.as_primitive::<Int64Type>().value(index)),
        DataType::UInt8 => Value::from(array.as_primitive::<UInt8Type>().value(index)),
        DataType::UInt16 => Value::from(array.as_primitive::<UInt16Type>().value(index)),
        DataType::UInt32 => Value::from(array.as_primitive::<UInt32Type>().value(index)),
        DataType::UInt64 => Value::from(array.as_primitive::<UInt64Type>().value(index)),
        DataType::Float16 => {
            short_float(array.as_primitive::<Float16Type>().value(index).to_f32())?
        }
        DataType::Float32 => short_float(array.as_primitive::<Float32Type>().value(index))?,
        DataType::Float64 => float(array.as_primitive::<Float64Type>().value(index))?,
        DataType::Utf8 => Value::from(array.as_string::<i32>().value(index)),
        DataType::LargeUtf8 => Value::from(array.as_string::<i64>().value(index)),
        DataType::Utf8View => Value::from(array.as_string_view().value(index)),
        DataType::List(_) => list(array.as_list::<i32>().value(index).as_ref())?,
        DataType::LargeList(_) => list(array.as_list::<i64>().value(index).as_ref())?,
        DataType::FixedSizeList(..) => list(array.as_fixed_size_list().value(index).as_ref())?,
        DataType::Struct(_) => object(array.as_struct(), index)?,
        DataType::Dictionary(..) => dictionary_entry(array, index)?,
        other => return Err(format!("type {other} cannot be a payload value")),
    };
    Ok(value)
}

/// NaN is a missing value (`null`); ±Inf has no JSON form.
fn float(value: f64) -> Result<Value, String> {
    if value.is_nan() {
        return Ok(Value::Null);
    }
    Number::from_f64(value)
        .map(Value::Number)
        .ok_or_else(|| format!("value {value} is not finite; JSON has no infinity"))
}

/// An f32 as the f64 nearest its shortest decimal form: 0.1_f32 is 0.1, not 0.100000001.
fn short_float(value: f32) -> Result<Value, String> {
    if !value.is_finite() {
        return float(f64::from(value));
    }
    let shortest: f64 = value.to_string().parse().unwrap_or(f64::from(value));
    float(shortest)
}

fn list(elements: &dyn Array) -> Result<Value, String> {
    (0..elements.len())
        .map(|index| json_value(elements, index))
        .collect::<Result<Vec<Value>, String>>()
        .map(Value::Array)
}

fn object(array: &StructArray, index: usize) -> Result<Value, String> {
    let mut object = Map::with_capacity(array.num_columns());
    for (name, column) in array.column_names().into_iter().zip(array.columns()) {
        let value =
            json_value(column.as_ref(), index).map_err(|reason| format!("{name}: {reason}"))?;
        object.insert(name.to_string(), value);
    }
    Ok(Value::Object(object))
}

/// Element `index` of a dictionary-encoded array: its key, looked up in the values.
fn dictionary_entry(array: &dyn Array, index: usize) -> Result<Value, String> {
    let dictionary = array.as_any_dictionary();
    let keys = dictionary.keys();
    let key = match keys.data_type() {
        DataType::Int8 => key_at::<Int8Type>(keys, index),
        DataType::Int16 => key_at::<Int16Type>(keys, index),
        DataType::Int32 => key_at::<Int32Type>(keys, index),
        DataType::Int64 => key_at::<Int64Type>(keys, index),
        DataType::UInt8 => key_at::<UInt8Type>(keys, index),
        DataType::UInt16 => key_at::<UInt16Type>(keys, index),
        DataType::UInt32 => key_at::<UInt32Type>(keys, index),
        DataType::UInt64 => key_at::<UInt64Type>(keys, index),
        other => return Err(format!("dictionary key type {other} is not an integer")),
    };
    let values = dictionary.values();
    match key {
        Some(key) if key < values.len() => json_value(values.as_ref(), key),
        _ => Err("dictionary key is out of range".into()),
    }
}

fn key_at<K>(keys: &dyn Array, index: usize) -> Option<usize>
where
    K: ArrowPrimitiveType,
    K::Native: TryInto<usize>,
{
    keys.as_primitive::<K>().value(index).try_into().ok()
}

//! The id column: signed or unsigned integers (negative is an error), UUID strings
//! (hyphenated or 32 hex digits) or 16-byte fixed-size binary UUIDs (big-endian).

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrowPrimitiveType};
use arrow_schema::DataType;
use sagitta_engine::point::{parse_uuid, PointId};

/// Checks that the column type can hold ids.
pub(super) fn check_type(data_type: &DataType) -> Result<(), String> {
    match data_type {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64
        | DataType::Utf8
        | DataType::LargeUtf8
        | DataType::Utf8View
        | DataType::FixedSizeBinary(16) => Ok(()),
        other => Err(format!(
            "type {other} cannot be an id; use an integer or a UUID string"
        )),
    }
}

/// The id in row `index` of an id column (whose type passed [`check_type`]).
pub(super) fn value(array: &dyn Array, index: usize) -> Result<PointId, String> {
    if array.is_null(index) {
        return Err("id is null".into());
    }
    let number = match array.data_type() {
        DataType::Int8 => signed_id::<Int8Type>(array, index)?,
        DataType::Int16 => signed_id::<Int16Type>(array, index)?,
        DataType::Int32 => signed_id::<Int32Type>(array, index)?,
        DataType::Int64 => signed_id::<Int64Type>(array, index)?,
        DataType::UInt8 => u64::from(array.as_primitive::<UInt8Type>().value(index)),
        DataType::UInt16 => u64::from(array.as_primitive::<UInt16Type>().value(index)),
        DataType::UInt32 => u64::from(array.as_primitive::<UInt32Type>().value(index)),
        DataType::UInt64 => array.as_primitive::<UInt64Type>().value(index),
        DataType::Utf8 => return uuid_id(array.as_string::<i32>().value(index)),
        DataType::LargeUtf8 => return uuid_id(array.as_string::<i64>().value(index)),
        DataType::Utf8View => return uuid_id(array.as_string_view().value(index)),
        DataType::FixedSizeBinary(16) => {
            let bytes = array.as_fixed_size_binary().value(index);
            let bytes: [u8; 16] = bytes.try_into().map_err(|_| "id is not 16 bytes")?;
            return Ok(PointId::Uuid(u128::from_be_bytes(bytes)));
        }
        other => return Err(format!("type {other} cannot be an id")),
    };
    Ok(PointId::Number(number))
}

fn signed_id<T>(array: &dyn Array, index: usize) -> Result<u64, String>
where
    T: ArrowPrimitiveType,
    T::Native: Into<i64>,
{
    let value: i64 = array.as_primitive::<T>().value(index).into();
    u64::try_from(value).map_err(|_| format!("id {value} is negative"))
}

fn uuid_id(text: &str) -> Result<PointId, String> {
    parse_uuid(text)
        .map(PointId::Uuid)
        .ok_or_else(|| format!("id {text:?} is not a UUID"))
}

//! Helpers for request fields that Qdrant defines but SagittaDB does not serve, and for
//! hand-written visitors that must name the field at fault.
//!
//! The rule: a field Qdrant defines is honoured, or refused with 400 naming its path; a
//! null (or default) value of a refused field is accepted, since it asks for nothing. A
//! field Qdrant does not define is refused with its path (the derived shapes use
//! `deny_unknown_fields`; the hand-written visitors call [`refuse_value`]).

use std::convert::Infallible;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess};
use serde::Deserialize;

/// Why a Qdrant field is refused when it is given a value other than null.
pub trait Refusal {
    const WHY: &'static str;
}

/// A field that may only be null (or absent): use as `Option<NullOnly<R>>`, whose `None`
/// is the null; any other value fails with `R::WHY` at the field's path.
pub struct NullOnly<R>(PhantomData<R>);

impl<R> fmt::Debug for NullOnly<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NullOnly")
    }
}

impl<R> Clone for NullOnly<R> {
    fn clone(&self) -> Self {
        NullOnly(PhantomData)
    }
}

impl<'de, R: Refusal> Deserialize<'de> for NullOnly<R> {
    fn deserialize<D: Deserializer<'de>>(_deserializer: D) -> Result<Self, D::Error> {
        Err(de::Error::custom(R::WHY))
    }
}

macro_rules! refusals {
    ($($name:ident => $why:expr;)*) => {
        $(
            pub struct $name;
            impl Refusal for $name {
                const WHY: &'static str = $why;
            }
        )*
    };
}

refusals! {
    NoShardKeys => "shard keys are not supported (SagittaDB shards by id hash, \
                    sharding_method \"auto\"); send null or leave the field out";
    NoPrefetch => "prefetch is not supported in group queries (POST /points/query \
                   fuses prefetches); send null or leave the field out";
    NoOrderBy => "order_by is not supported: scroll pages go in id order; send null or \
                  leave the field out";
}

/// Fails at the value of the key just read, so that the error's path names the key
/// (`points[0].foo`), with `message`.
pub fn refuse_value<'de, A: MapAccess<'de>>(map: &mut A, message: String) -> A::Error {
    struct Refuse(String);
    impl<'de> DeserializeSeed<'de> for Refuse {
        type Value = Infallible;
        fn deserialize<D: Deserializer<'de>>(self, _: D) -> Result<Infallible, D::Error> {
            Err(de::Error::custom(self.0))
        }
    }
    match map.next_value_seed(Refuse(message)) {
        Err(error) => error,
        Ok(never) => match never {},
    }
}

/// The message for a field that is not one of `expected`.
pub fn unknown_field(key: &str, expected: &[&str]) -> String {
    let expected: Vec<String> = expected.iter().map(|name| format!("`{name}`")).collect();
    format!(
        "unknown field `{key}`, expected one of {}",
        expected.join(", ")
    )
}

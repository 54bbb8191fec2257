//! SagittaDB command-line tool, library part: the input readers of `sagitta import`
//! (`.npy`, `.fvecs` / `.bvecs`, Parquet), and the logger of `sagitta serve`. The binary (`src/main.rs`) parses the command line
//! and hands the points read to the engine.
#![deny(unsafe_code)]

pub mod logger;
pub mod readers;

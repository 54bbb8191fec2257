//! `sagitta`, the SagittaDB command-line tool.
//!
//! `sagitta import` bulk-loads a `.npy`, `.fvecs` / `.bvecs` or Parquet file into a new
//! collection. Exit status: 0 on success, 2 when the command line is wrong, 1 when the data
//! or the disk is.
#![deny(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand, ValueEnum};
use sagitta_cli::readers::{read_points, Format, ImportError, ReadOptions, ReadPoints};
use sagitta_engine::collection::{CollectionConfig, MAX_SHARDS};
use sagitta_engine::database::{check_collection_name, Database};
use sagitta_engine::point::Distance;
use sagitta_storage::fs::OsFileSystem;

#[derive(Parser)]
#[command(name = "sagitta", version, about = "SagittaDB command-line tool")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Bulk-load a .npy, .fvecs/.bvecs or Parquet file into a new collection, all or nothing.
    Import(ImportArgs),
}

#[derive(Args)]
struct ImportArgs {
    /// Database directory (created if missing).
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Name of the collection to create.
    #[arg(long, value_name = "NAME")]
    collection: String,
    /// Distance of the collection.
    #[arg(long, value_enum, ignore_case = true)]
    distance: DistanceArg,
    /// Number of shards.
    #[arg(long, value_name = "N", default_value_t = 1)]
    shards: usize,
    /// Source format; by default taken from the extension (.npy, .fvecs, .bvecs, .parquet).
    #[arg(long, value_enum)]
    format: Option<FormatArg>,
    /// npy/fvecs/bvecs: 1-D integer .npy file with one id per row.
    #[arg(long, value_name = "FILE")]
    ids: Option<PathBuf>,
    /// npy/fvecs/bvecs: JSON Lines file with one payload object per row.
    #[arg(long, value_name = "FILE")]
    payloads: Option<PathBuf>,
    /// Ids are row number + N when no --ids file or id column gives them [default: 0].
    #[arg(long, value_name = "N")]
    id_offset: Option<u64>,
    /// Parquet: id column, integer or UUID string [default: `id` if present, else row numbers].
    #[arg(long, value_name = "COLUMN")]
    id_column: Option<String>,
    /// Parquet: vector column, a list of floats [default: vector].
    #[arg(long, value_name = "COLUMN")]
    vector_column: Option<String>,
    /// The file to import.
    source: PathBuf,
}

#[derive(Clone, Copy, ValueEnum)]
enum DistanceArg {
    #[value(name = "Cosine")]
    Cosine,
    #[value(name = "Dot")]
    Dot,
    #[value(name = "Euclid")]
    Euclid,
}

impl From<DistanceArg> for Distance {
    fn from(distance: DistanceArg) -> Distance {
        match distance {
            DistanceArg::Cosine => Distance::Cosine,
            DistanceArg::Dot => Distance::Dot,
            DistanceArg::Euclid => Distance::Euclid,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    Npy,
    Fvecs,
    Bvecs,
    Parquet,
}

impl From<FormatArg> for Format {
    fn from(format: FormatArg) -> Format {
        match format {
            FormatArg::Npy => Format::Npy,
            FormatArg::Fvecs => Format::Fvecs,
            FormatArg::Bvecs => Format::Bvecs,
            FormatArg::Parquet => Format::Parquet,
        }
    }
}

/// A failed command: the message and whether the command line (not the data) is at fault.
struct Failure {
    message: String,
    usage: bool,
}

impl From<ImportError> for Failure {
    fn from(error: ImportError) -> Failure {
        Failure {
            usage: error.is_usage(),
            message: error.to_string(),
        }
    }
}

fn usage_failure(message: String) -> Failure {
    Failure {
        message,
        usage: true,
    }
}

fn main() -> ExitCode {
    // clap prints its own usage errors and exits with status 2.
    let Command::Import(args) = Cli::parse().command;
    match import(&args) {
        Ok(summary) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            ExitCode::from(if failure.usage { 2 } else { 1 })
        }
    }
}

/// Checks the command line, reads the source and imports it; returns the summary line.
fn import(args: &ImportArgs) -> Result<String, Failure> {
    check_collection_name(&args.collection).map_err(|error| usage_failure(error.to_string()))?;
    if !(1..=MAX_SHARDS).contains(&args.shards) {
        return Err(usage_failure(format!(
            "--shards {} is outside 1..={MAX_SHARDS}",
            args.shards
        )));
    }
    let options = ReadOptions {
        format: args.format.map(Format::from),
        ids: args.ids.clone(),
        payloads: args.payloads.clone(),
        id_offset: args.id_offset,
        id_column: args.id_column.clone(),
        vector_column: args.vector_column.clone(),
    };
    let read = read_points(&args.source, &options)?;
    import_points(args, read)
}

/// Creates the collection from the points read, published with one manifest swap.
fn import_points(args: &ImportArgs, read: ReadPoints) -> Result<String, Failure> {
    let ReadPoints {
        points,
        dim,
        bytes_read,
    } = read;
    let config = CollectionConfig {
        dim,
        distance: args.distance.into(),
        shard_count: args.shards,
    };
    let data_failure = |error: sagitta_engine::EngineError| Failure {
        usage: false,
        message: error.to_string(),
    };
    let database = Database::open(Arc::new(OsFileSystem), &args.data).map_err(data_failure)?;
    let (_, report) = database
        .import_collection(&args.collection, config, points)
        .map_err(data_failure)?;
    Ok(format!(
        "imported {} points (dim {dim}, {:?}, {bytes_read} bytes read) into collection `{}` \
         in {}: {} segments, {} bytes written",
        report.points,
        config.distance,
        args.collection,
        args.data.display(),
        report.segments,
        report.bytes_written,
    ))
}

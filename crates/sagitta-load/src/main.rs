//! `sagitta-load`: see the library documentation and `sagitta-load --help`.
#![deny(unsafe_code)]

use clap::Parser;

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let args = sagitta_load::Args::parse_from(&argv);
    if let Err(error) = sagitta_load::run(&args, &argv) {
        eprintln!("sagitta-load: {error}");
        std::process::exit(1);
    }
}

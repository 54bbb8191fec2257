//! Tidy rules as `cargo test` (rust-analyzer's `tidy.rs`, TigerBeetle's `tidy.zig`): the
//! tests in `tests/tidy.rs` read the repository's own files and fail naming the file and
//! line of each violation. This library holds only what those tests need: the list of
//! files, a small Rust lexer and the scanners built on it. No other crate depends on it.
#![deny(unsafe_code)]

pub mod fns;
pub mod items;
pub mod lexer;
pub mod modules;
pub mod unsafety;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root: two levels above this crate's manifest.
#[must_use]
pub fn repo_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .and_then(Path::parent)
        .expect("crates/sagitta-tidy sits two levels below the root")
        .to_path_buf()
}

/// One file of the repository.
#[derive(Clone, Debug)]
pub struct SourceFile {
    /// Path relative to the root, `/`-separated (`crates/sagitta-index/src/lib.rs`).
    pub path: String,
    pub text: String,
}

/// Relative paths of the repository's files: what `git ls-files` lists (tracked files,
/// plus untracked ones git does not ignore, so a new file is checked before it is
/// committed), minus files deleted from the work tree. Without git, a walk of the source
/// folders.
#[must_use]
pub fn repo_paths(root: &Path) -> Vec<String> {
    let listed = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root)
        .output()
        .ok()
        .filter(|output| output.status.success());
    let mut paths: Vec<String> = match listed {
        Some(output) => String::from_utf8_lossy(&output.stdout)
            .split('\0')
            .filter(|path| !path.is_empty())
            .map(str::to_owned)
            .collect(),
        None => walk(root),
    };
    paths.sort();
    paths.dedup();
    paths.retain(|path| root.join(path).is_file());
    paths
}

/// Folders walked when git is unavailable, and folders never walked into.
const WALKED: [&str; 6] = ["crates", "python", "bench", "rag", "scripts", "docs"];
const SKIPPED: [&str; 4] = ["target", "__pycache__", "node_modules", "cache"];

fn walk(root: &Path) -> Vec<String> {
    let mut paths = Vec::new();
    let top_level_files = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.path().is_file());
    paths.extend(top_level_files.map(|entry| entry.file_name().to_string_lossy().into_owned()));
    let mut pending: Vec<PathBuf> = WALKED.iter().map(|folder| root.join(folder)).collect();
    while let Some(folder) = pending.pop() {
        for entry in std::fs::read_dir(&folder).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if name.starts_with('.') || SKIPPED.contains(&name.as_str()) {
                continue;
            }
            if path.is_dir() {
                pending.push(path);
            } else if let Ok(relative) = path.strip_prefix(root) {
                paths.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    paths
}

/// The repository's text files with one of `extensions` (`"rs"`).
#[must_use]
pub fn source_files(extensions: &[&str]) -> Vec<SourceFile> {
    source_files_where(|path| {
        let extension = Path::new(path)
            .extension()
            .and_then(|extension| extension.to_str());
        extension.is_some_and(|extension| extensions.contains(&extension))
    })
}

/// The repository's text files whose relative path `keep` accepts (files that are not
/// UTF-8 are skipped: they are not source).
#[must_use]
pub fn source_files_where(keep: impl Fn(&str) -> bool) -> Vec<SourceFile> {
    let root = repo_root();
    repo_paths(&root)
        .into_iter()
        .filter(|path| keep(path))
        .filter_map(|path| {
            let text = std::fs::read_to_string(root.join(&path)).ok()?;
            Some(SourceFile { path, text })
        })
        .collect()
}

/// The Rust crates of the workspace that have a `src/` folder: (crate folder, e.g.
/// `crates/sagitta-engine` or `python`).
#[must_use]
pub fn crate_folders(files: &[SourceFile]) -> Vec<String> {
    let mut folders: Vec<String> = files
        .iter()
        .filter_map(|file| file.path.find("/src/").map(|at| file.path[..at].to_owned()))
        .filter(|folder| {
            folder.starts_with("crates/") && folder.matches('/').count() == 1 || folder == "python"
        })
        .collect();
    folders.sort();
    folders.dedup();
    folders
}

/// Whether `path` lies in a crate's `src/` (not its tests, benches or examples).
#[must_use]
pub fn in_src(path: &str) -> bool {
    let in_crates = path.starts_with("crates/") && path.split('/').nth(2) == Some("src");
    in_crates || path.starts_with("python/src/")
}

/// Formats violations one per line under a heading, for a test's panic message.
#[must_use]
pub fn report(rule: &str, violations: &[String]) -> String {
    format!(
        "tidy: {rule}\n  {}\n({} violation(s))",
        violations.join("\n  "),
        violations.len()
    )
}

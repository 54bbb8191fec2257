//! The repository's tidy rules. Each test reads the files `git ls-files` lists (tracked and
//! untracked-but-not-ignored) and fails naming every violation's file and line. The
//! allow-lists below hold today's exceptions and may only shrink: a test fails when an
//! entry is no longer needed, so that it gets removed.

use std::collections::{BTreeMap, BTreeSet};

use sagitta_tidy::fns::function_lengths;
use sagitta_tidy::lexer::code_tokens;
use sagitta_tidy::modules::{add_edges, cyclic_components, elementary_cycles, module_path, Graph};
use sagitta_tidy::unsafety::{unsafe_uses, UnsafeKind};
use sagitta_tidy::{crate_folders, in_src, report, source_files, source_files_where, SourceFile};

/// The longest a `.rs` or `.py` file may be.
const MAX_FILE_LINES: usize = 1_200;

/// The longest a function in a crate's `src/` may be, from its `fn` line to its closing
/// brace.
const MAX_FN_LINES: usize = 70;

/// Functions over [`MAX_FN_LINES`] today: (file, `Type::name` or `name`, lines). A listed
/// function may not grow; once it is within the cap (or gone) its entry must be removed.
#[rustfmt::skip]
const LONG_FUNCTIONS: &[(&str, &str, usize)] = &[
];

/// Module cycles today: (crate folder, the sorted modules of one strongly connected
/// component). The test fails when a crate's cyclic components differ from these in any
/// way: a new one, one that grew, or one that shrank or is gone (update the entry).
#[rustfmt::skip]
const KNOWN_CYCLES: &[(&str, &[&str])] = &[
];

/// Files that may name a developer machine's absolute path: (file, why).
/// An entry must be removed once its file no longer has one.
#[rustfmt::skip]
const ABSOLUTE_PATH_EXCEPTIONS: &[(&str, &str)] = &[
];

/// The only places allowed `unsafe` code: the kernels crate, and the io_uring backend of
/// the page reader (a buffer handed to the kernel; its safety argument heads the file).
const UNSAFE_PLACES: &[&str] = &[
    "crates/sagitta-kernels/",
    "crates/sagitta-storage/src/pageio/uring.rs",
];

fn fail_if_any(rule: &str, violations: &[String]) {
    assert!(violations.is_empty(), "{}", report(rule, violations));
}

#[test]
fn files_are_at_most_1200_lines() {
    let violations: Vec<String> = source_files(&["rs", "py"])
        .iter()
        .filter(|file| file.text.lines().count() > MAX_FILE_LINES)
        .map(|file| {
            format!(
                "{}: {} lines (max {MAX_FILE_LINES}); split it",
                file.path,
                file.text.lines().count()
            )
        })
        .collect();
    fail_if_any("source files over the length limit", &violations);
}

#[test]
fn no_dbg_macro() {
    let mut violations = Vec::new();
    for file in source_files(&["rs"]) {
        let tokens = code_tokens(&file.text);
        for window in tokens.windows(3) {
            if window[0].is_word("dbg") && window[1].is_punct('!') && window[2].is_punct('(') {
                violations.push(format!("{}:{}: dbg! left in", file.path, window[0].line));
            }
        }
    }
    fail_if_any("dbg! found", &violations);
}

/// The crates whose lines reach an operator through a merged output (a server's log, the
/// ranks of an MPI job under mpirun). The tools (sagitta-load, this crate) may print freely.
fn prints_whole_lines(path: &str) -> bool {
    in_src(path)
        && !path.starts_with("crates/sagitta-load/")
        && !path.starts_with("crates/sagitta-tidy/")
}

#[test]
fn server_lines_go_out_in_one_write() {
    // `eprintln!` writes the pieces of its format one by one: under mpirun another rank's
    // line can land inside one (CI lost rank 0's "listening on" address that way)
    let mut violations = Vec::new();
    for file in source_files(&["rs"]) {
        if !prints_whole_lines(&file.path) {
            continue;
        }
        let tokens = code_tokens(&file.text);
        for window in tokens.windows(2) {
            let printing = window[0].is_word("eprintln") || window[0].is_word("eprint");
            if printing && window[1].is_punct('!') {
                violations.push(format!(
                    "{}:{}: eprintln!/eprint! writes a line in pieces; use the log facade (the binary's logger writes each record at once) or sagitta-cli's `say!`",
                    file.path, window[0].line
                ));
            }
        }
    }
    fail_if_any("lines written in pieces", &violations);
}

/// The words that mark unfinished work, spelled so that this file does not contain them.
fn unfinished_markers() -> [&'static str; 3] {
    [
        concat!("TO", "DO"),
        concat!("FIX", "ME"),
        concat!("X", "XX"),
    ]
}

/// Whether `text` has `marker` as a whole word that is not followed by `(#N)` or `(N)`.
fn marker_without_issue(text: &str, marker: &str) -> bool {
    let is_word = |byte: u8| byte.is_ascii_alphanumeric() || byte == b'_';
    text.match_indices(marker).any(|(at, _)| {
        let before = text[..at].bytes().next_back();
        let rest = &text[at + marker.len()..];
        if before.is_some_and(is_word) || rest.bytes().next().is_some_and(is_word) {
            return false;
        }
        let Some(inside) = rest
            .strip_prefix('(')
            .and_then(|rest| rest.split_once(')'))
            .map(|(inside, _)| inside)
        else {
            return true;
        };
        let number = inside.strip_prefix('#').unwrap_or(inside);
        number.is_empty() || !number.bytes().all(|byte| byte.is_ascii_digit())
    })
}

#[test]
fn unfinished_work_names_an_issue() {
    let mut violations = Vec::new();
    for file in source_files(&["rs", "py"]) {
        for (number, line) in file.text.lines().enumerate() {
            if let Some(marker) = unfinished_markers()
                .into_iter()
                .find(|marker| marker_without_issue(line, marker))
            {
                violations.push(format!(
                    "{}:{}: {marker} without an issue number; write {marker}(#N)",
                    file.path,
                    number + 1
                ));
            }
        }
    }
    fail_if_any(
        "unfinished-work markers without an issue number",
        &violations,
    );
}

#[test]
fn unsafe_only_in_allowed_places_and_justified() {
    let mut violations = Vec::new();
    for file in source_files(&["rs"]) {
        for found in unsafe_uses(&file.text) {
            let place = format!("{}:{}", file.path, found.line);
            if !UNSAFE_PLACES
                .iter()
                .any(|allowed| file.path.starts_with(allowed))
            {
                violations.push(format!("{place}: unsafe outside {UNSAFE_PLACES:?} (every other crate has #![deny(unsafe_code)])"));
            } else if !found.justified {
                let needs = match found.kind {
                    UnsafeKind::Fn | UnsafeKind::Trait => "a `# Safety` section in its docs",
                    UnsafeKind::Block | UnsafeKind::Impl | UnsafeKind::Other => {
                        "a `// SAFETY:` comment just above it"
                    }
                };
                violations.push(format!("{place}: unsafe {:?} without {needs}", found.kind));
            }
        }
    }
    fail_if_any("unsafe code", &violations);
}

/// The absolute-path prefixes of a developer's machine, spelled so that this file does not
/// contain them.
fn machine_path_markers() -> [&'static str; 4] {
    [
        concat!("/", "work/"),
        concat!("/", "home/"),
        concat!("/", "Users/"),
        concat!("/", "root/"),
    ]
}

/// Whether `line` names an absolute path under one of the machine path markers (not as
/// the tail of a longer path or URL such as `~/work/` or `example.com/home/`).
fn machine_path(line: &str) -> Option<&'static str> {
    machine_path_markers().into_iter().find(|marker| {
        line.match_indices(marker).any(|(at, _)| {
            let before = line[..at].chars().next_back();
            !before.is_some_and(|before| before.is_alphanumeric() || "_.~/-$".contains(before))
        })
    })
}

/// Source, docs, scripts and benchmark results (their commands and dataset paths are read
/// and rerun by someone else).
fn checked_for_paths(path: &str) -> bool {
    let extension = std::path::Path::new(path).extension();
    let extension = extension.and_then(std::ffi::OsStr::to_str).unwrap_or("");
    ["rs", "py", "pyi", "sh", "md", "toml", "json"].contains(&extension) || path == ".ci/run"
}

#[test]
fn no_absolute_paths_of_a_developer_machine() {
    let mut violations = Vec::new();
    let mut excepted_files_with_paths = BTreeSet::new();
    let files = source_files_where(checked_for_paths);
    for file in &files {
        for (number, line) in file.text.lines().enumerate() {
            let Some(marker) = machine_path(line) else {
                continue;
            };
            if ABSOLUTE_PATH_EXCEPTIONS
                .iter()
                .any(|(path, _)| *path == file.path)
            {
                excepted_files_with_paths.insert(file.path.as_str());
            } else {
                violations.push(format!("{}:{}: absolute path `{marker}...` of a developer machine; use a relative path, an argument or an environment variable", file.path, number + 1));
            }
        }
    }
    for (path, _) in ABSOLUTE_PATH_EXCEPTIONS {
        if !excepted_files_with_paths.contains(path) {
            violations.push(format!(
                "{path}: no absolute path left; remove its entry from ABSOLUTE_PATH_EXCEPTIONS"
            ));
        }
    }
    fail_if_any("absolute paths", &violations);
}

#[test]
fn functions_are_at_most_70_lines() {
    let mut violations = Vec::new();
    let mut seen = BTreeSet::new();
    let files: Vec<SourceFile> = source_files(&["rs"])
        .into_iter()
        .filter(|file| in_src(&file.path))
        .collect();
    for file in &files {
        for function in function_lengths(&file.text) {
            if function.lines <= MAX_FN_LINES {
                continue;
            }
            let place = format!(
                "{}:{}: fn {} is {} lines",
                file.path, function.line, function.name, function.lines
            );
            let listed = LONG_FUNCTIONS
                .iter()
                .find(|(path, name, _)| *path == file.path && *name == function.name);
            match listed {
                None => violations.push(format!("{place} (max {MAX_FN_LINES}); split it")),
                Some((path, name, limit)) => {
                    seen.insert((path, name));
                    if function.lines > *limit {
                        violations.push(format!("{place}, longer than its allow-listed {limit}; split it, the list only shrinks"));
                    }
                }
            }
        }
    }
    for (path, name, limit) in LONG_FUNCTIONS {
        if !seen.contains(&(path, name)) {
            violations.push(format!("{path}: fn {name} (listed at {limit} lines) is now within {MAX_FN_LINES} lines or gone; remove its entry from LONG_FUNCTIONS"));
        }
    }
    fail_if_any("functions over the length limit", &violations);
}

/// Each crate's module graph, keyed by crate folder.
fn module_graphs() -> BTreeMap<String, Graph> {
    let files = source_files(&["rs"]);
    let mut graphs = BTreeMap::new();
    for folder in crate_folders(&files) {
        let src = format!("{folder}/src/");
        let crate_files: Vec<(&SourceFile, Vec<String>)> = files
            .iter()
            .filter_map(|file| {
                file.path
                    .strip_prefix(&src)
                    .and_then(module_path)
                    .map(|path| (file, path))
            })
            .collect();
        let modules: BTreeSet<String> = crate_files
            .iter()
            .map(|(_, path)| path[0].clone())
            .collect();
        let mut graph = Graph::new();
        for (file, path) in &crate_files {
            add_edges(&mut graph, &modules, &file.path, path, &file.text);
        }
        graphs.insert(folder, graph);
    }
    graphs
}

/// Each elementary cycle of `component`, written `a -> b -> a`, with the file:line sites
/// that make each of its edges.
fn describe_cycles(graph: &Graph, component: &[String]) -> Vec<String> {
    let cycles = elementary_cycles(graph, component, MAX_CYCLES_LISTED);
    let mut described: Vec<String> = cycles
        .iter()
        .map(|cycle| {
            let edges: Vec<String> = cycle
                .windows(2)
                .map(|pair| {
                    let sites: Vec<String> = graph[&pair[0]][&pair[1]]
                        .iter()
                        .map(|site| format!("{}:{}", site.file, site.line))
                        .collect();
                    format!("      {} -> {}: {}", pair[0], pair[1], sites.join(", "))
                })
                .collect();
            format!("    {}\n{}", cycle.join(" -> "), edges.join("\n"))
        })
        .collect();
    if cycles.len() == MAX_CYCLES_LISTED {
        described.push(format!(
            "    (only the first {MAX_CYCLES_LISTED} cycles listed)"
        ));
    }
    described
}

/// How many elementary cycles of one component a failure lists.
const MAX_CYCLES_LISTED: usize = 100;

#[test]
fn no_module_cycles_within_a_crate() {
    let mut violations = Vec::new();
    let mut found: BTreeMap<&str, Vec<Vec<String>>> = BTreeMap::new();
    let graphs = module_graphs();
    for (folder, graph) in &graphs {
        for component in cyclic_components(graph) {
            let known = KNOWN_CYCLES
                .iter()
                .any(|(known_folder, modules)| known_folder == folder && *modules == component);
            if !known {
                violations.push(format!(
                    "{folder}: modules {{{}}} import each other; the cycles:\n{}",
                    component.join(", "),
                    describe_cycles(graph, &component).join("\n")
                ));
            }
            found.entry(folder).or_default().push(component);
        }
    }
    for (folder, modules) in KNOWN_CYCLES {
        let components = found.get(folder).map(Vec::as_slice).unwrap_or_default();
        if !components.iter().any(|component| component == modules) {
            violations.push(format!(
                "{folder}: the known cycle among {{{}}} is gone (now: {components:?}); \
                 remove or replace its entry in KNOWN_CYCLES",
                modules.join(", ")
            ));
        }
    }
    fail_if_any(
        "module import cycles (break them by moving the shared item down a layer)",
        &violations,
    );
}

#[test]
fn marker_and_path_matchers() {
    let todo = unfinished_markers()[0];
    assert!(marker_without_issue(&format!("// {todo}: later"), todo));
    assert!(marker_without_issue(&format!("// {todo}(#x) later"), todo));
    assert!(!marker_without_issue(
        &format!("// {todo}(#14): later"),
        todo
    ));
    assert!(!marker_without_issue(
        &format!("// {todo}(14): later"),
        todo
    ));
    assert!(!marker_without_issue(&format!("// {todo}S are fine"), todo));
    assert!(machine_path(&format!("let p = \"{}shared\";", machine_path_markers()[0])).is_some());
    assert!(machine_path(&format!(
        "see https://example.com{}x",
        machine_path_markers()[1]
    ))
    .is_none());
    assert!(machine_path("/tmp/x and /usr/bin").is_none());
}

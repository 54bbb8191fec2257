//! Module dependencies inside one crate, and the cycles among them.
//!
//! A node is a top-level module under `crate::` (`src/hnsw/format.rs` belongs to node
//! `hnsw`). Module A depends on module B when A's code names a path into B:
//! `use crate::b::X`, `crate::b::f()`, `use crate::{b::X, c}`, or `super::b` resolved from
//! A's place (inline `mod` blocks included). `lib.rs` and `main.rs` are no node; self-edges
//! are dropped, and so is code in `#[cfg(test)]` modules.

use std::collections::{BTreeMap, BTreeSet};

use crate::items::{items, Item, ItemKind};
use crate::lexer::{code_tokens, Kind, Token};

/// Where an edge comes from: the file and line of the path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Site {
    pub file: String,
    pub line: usize,
}

/// A crate's module graph: node → node → the sites that make the edge.
pub type Graph = BTreeMap<String, BTreeMap<String, Vec<Site>>>;

/// The node (top-level module) and full module path of a file, from its path relative to
/// the crate's `src/` (`hnsw/format.rs` → `hnsw`, `["hnsw", "format"]`). `None` for the
/// crate roots (`lib.rs`, `main.rs`) and for `bin/`.
#[must_use]
pub fn module_path(relative_to_src: &str) -> Option<Vec<String>> {
    let without_extension = relative_to_src.strip_suffix(".rs")?;
    let mut parts: Vec<String> = without_extension.split('/').map(str::to_owned).collect();
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") || parts[0] == "bin" {
        return None;
    }
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    Some(parts)
}

/// Adds to `graph` the edges that `source` (the file `file`, at module path `path`) makes
/// to the crate's `modules` (the set of top-level module names). Code in `#[cfg(test)]`
/// modules makes no edges: a unit test using a sibling module is no layering cycle.
pub fn add_edges(
    graph: &mut Graph,
    modules: &BTreeSet<String>,
    file: &str,
    path: &[String],
    source: &str,
) {
    let tokens = code_tokens(source);
    let inline_modules: Vec<Item> = items(&tokens)
        .into_iter()
        .filter(|item| matches!(item.kind, ItemKind::Mod { .. }))
        .collect();
    let node = &path[0];
    let targets = graph.entry(node.clone()).or_default();
    for index in 0..tokens.len() {
        let around: Vec<&Item> = inline_modules
            .iter()
            .filter(|module| module.contains(index))
            .collect();
        if around
            .iter()
            .any(|module| module.kind == (ItemKind::Mod { cfg_test: true }))
        {
            continue;
        }
        let depth = path.len() + around.len();
        for target in path_targets(&tokens, index, depth) {
            let target = &tokens[target];
            if target.text != node && modules.contains(target.text) {
                let site = Site {
                    file: file.to_owned(),
                    line: target.line,
                };
                targets
                    .entry(target.text.to_owned())
                    .or_default()
                    .push(site);
            }
        }
    }
}

/// Whether `tokens[position]` and the next token are `::`.
fn path_separator_at(tokens: &[Token<'_>], position: usize) -> bool {
    tokens
        .get(position)
        .is_some_and(|token| token.is_punct(':'))
        && tokens
            .get(position + 1)
            .is_some_and(|token| token.is_punct(':'))
}

/// When a path starts at `index` with `crate::` or `super::` (in a module `depth` levels
/// below the crate root) and reaches the crate root, the tokens naming the top-level
/// modules it goes into: one word, or each head of a `{...}` group. Empty otherwise.
fn path_targets(tokens: &[Token<'_>], index: usize, depth: usize) -> Vec<usize> {
    let starts_path = path_separator_at(tokens, index + 1)
        && !(index >= 2 && path_separator_at(tokens, index - 2));
    let (mut position, mut depth) = if !starts_path {
        return Vec::new();
    } else if tokens[index].is_word("crate") {
        (index + 3, 0)
    } else if tokens[index].is_word("super") {
        (index, depth)
    } else {
        return Vec::new();
    };
    // Follow `super::super::...`; each one goes up a level.
    while tokens
        .get(position)
        .is_some_and(|token| token.is_word("super"))
        && path_separator_at(tokens, position + 1)
    {
        depth = depth.saturating_sub(1);
        position += 3;
    }
    if depth > 0 {
        return Vec::new(); // still inside the file's own top-level module: a self-edge
    }
    match tokens.get(position) {
        Some(next) if next.kind == Kind::Word => vec![position],
        Some(next) if next.is_punct('{') => group_heads(tokens, position),
        _ => Vec::new(),
    }
}

/// The first word of each entry of the `use` group whose `{` is at `open`.
fn group_heads(tokens: &[Token<'_>], open: usize) -> Vec<usize> {
    let mut heads = Vec::new();
    let mut depth = 0usize;
    for (position, token) in tokens.iter().enumerate().skip(open) {
        if token.is_punct('{') {
            depth += 1;
        } else if token.is_punct('}') {
            depth -= 1;
            if depth == 0 {
                break;
            }
        }
        let opens_entry = tokens[position - 1].is_punct(',') || position == open + 1;
        if depth == 1 && opens_entry && token.kind == Kind::Word && position > open {
            heads.push(position);
        }
    }
    heads
}

/// Strongly connected components of `graph` with more than one node (Tarjan's algorithm),
/// each sorted, in order of their smallest node.
#[must_use]
pub fn cyclic_components(graph: &Graph) -> Vec<Vec<String>> {
    let nodes: Vec<&String> = graph
        .keys()
        .chain(graph.values().flat_map(BTreeMap::keys))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let index_of: BTreeMap<&String, usize> = nodes
        .iter()
        .enumerate()
        .map(|(index, node)| (*node, index))
        .collect();
    let successors: Vec<Vec<usize>> = nodes
        .iter()
        .map(|node| {
            graph
                .get(*node)
                .map(|targets| targets.keys().map(|target| index_of[target]).collect())
                .unwrap_or_default()
        })
        .collect();
    let mut tarjan = Tarjan {
        successors: &successors,
        index: vec![None; nodes.len()],
        low: vec![0; nodes.len()],
        on_stack: vec![false; nodes.len()],
        stack: Vec::new(),
        counter: 0,
        components: Vec::new(),
    };
    for node in 0..nodes.len() {
        if tarjan.index[node].is_none() {
            tarjan.connect(node);
        }
    }
    let mut components: Vec<Vec<String>> = tarjan
        .components
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let mut names: Vec<String> = component
                .into_iter()
                .map(|node| nodes[node].clone())
                .collect();
            names.sort();
            names
        })
        .collect();
    components.sort();
    components
}

struct Tarjan<'a> {
    successors: &'a [Vec<usize>],
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    counter: usize,
    components: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    /// The recursive step; module graphs are a few dozen nodes deep at most.
    fn connect(&mut self, node: usize) {
        self.index[node] = Some(self.counter);
        self.low[node] = self.counter;
        self.counter += 1;
        self.stack.push(node);
        self.on_stack[node] = true;
        for &next in &self.successors[node] {
            match self.index[next] {
                None => {
                    self.connect(next);
                    self.low[node] = self.low[node].min(self.low[next]);
                }
                Some(next_index) if self.on_stack[next] => {
                    self.low[node] = self.low[node].min(next_index);
                }
                Some(_) => {}
            }
        }
        if Some(self.low[node]) == self.index[node] {
            let mut component = Vec::new();
            while let Some(member) = self.stack.pop() {
                self.on_stack[member] = false;
                component.push(member);
                if member == node {
                    break;
                }
            }
            self.components.push(component);
        }
    }
}

/// The elementary cycles within `component` (a strongly connected set of nodes of `graph`),
/// each written from its smallest node and closed (`["a", "b", "a"]`), at most `limit` of
/// them, in lexicographic order.
#[must_use]
pub fn elementary_cycles(graph: &Graph, component: &[String], limit: usize) -> Vec<Vec<String>> {
    let members: BTreeSet<&String> = component.iter().collect();
    let mut cycles = Vec::new();
    for start in component {
        // Cycles whose smallest node is `start`: search paths through larger nodes only.
        let mut path = vec![start.clone()];
        extend_cycles(graph, &members, start, &mut path, &mut cycles, limit);
    }
    cycles.sort();
    cycles
}

fn extend_cycles(
    graph: &Graph,
    members: &BTreeSet<&String>,
    start: &String,
    path: &mut Vec<String>,
    cycles: &mut Vec<Vec<String>>,
    limit: usize,
) {
    let last = path.last().expect("path starts with a node").clone();
    let Some(targets) = graph.get(&last) else {
        return;
    };
    for target in targets.keys() {
        if cycles.len() >= limit {
            return;
        }
        if target == start {
            let mut cycle = path.clone();
            cycle.push(start.clone());
            cycles.push(cycle);
        } else if target > start && members.contains(target) && !path.contains(target) {
            path.push(target.clone());
            extend_cycles(graph, members, start, path, cycles, limit);
            path.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{add_edges, cyclic_components, elementary_cycles, module_path, Graph, Site};
    use std::collections::BTreeSet;

    fn graph(edges: &[(&str, &str)]) -> Graph {
        let mut graph = Graph::new();
        for (line, (from, to)) in edges.iter().enumerate() {
            let site = Site {
                file: format!("{from}.rs"),
                line,
            };
            graph
                .entry((*from).into())
                .or_default()
                .entry((*to).into())
                .or_default()
                .push(site);
        }
        graph
    }

    #[test]
    fn finds_cycles_and_only_cycles() {
        // a -> b -> c -> a and c -> d -> c are cycles (one component {a, b, c, d});
        // e -> a and d -> f are not; g <-> h is a second component.
        let edges = [
            ("a", "b"),
            ("b", "c"),
            ("c", "a"),
            ("c", "d"),
            ("d", "c"),
            ("e", "a"),
            ("d", "f"),
            ("g", "h"),
            ("h", "g"),
        ];
        let graph = graph(&edges);
        let components = cyclic_components(&graph);
        assert_eq!(components, [vec!["a", "b", "c", "d"], vec!["g", "h"]]);
        let cycles = elementary_cycles(&graph, &components[0], 100);
        assert_eq!(cycles, [vec!["a", "b", "c", "a"], vec!["c", "d", "c"]]);
        assert!(cyclic_components(&self::graph(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
    }

    #[test]
    fn module_paths_and_edges() {
        assert_eq!(
            module_path("hnsw/format.rs"),
            Some(vec!["hnsw".to_owned(), "format".to_owned()])
        );
        assert_eq!(module_path("flat/mod.rs"), Some(vec!["flat".to_owned()]));
        assert_eq!(module_path("lib.rs"), None);
        let modules: BTreeSet<String> = ["hnsw", "flat", "error", "metric", "top_k", "visited"]
            .iter()
            .map(|name| (*name).to_owned())
            .collect();
        let source = r#"use crate::{error::E, metric};
use super::storage::S;
use super::super::top_k::TopK;
// crate::flat in a comment
fn f() { crate::flat::search(); let s = "crate::flat"; }
mod inner {
    use super::super::super::visited::Visited;
}
#[cfg(test)]
mod tests {
    use crate::flat::FlatIndex;
    use super::*;
}
"#;
        let mut graph = Graph::new();
        add_edges(
            &mut graph,
            &modules,
            "src/hnsw/search.rs",
            &["hnsw".to_owned(), "search".to_owned()],
            source,
        );
        let edges: Vec<(&str, Vec<usize>)> = graph["hnsw"]
            .iter()
            .map(|(to, sites)| (to.as_str(), sites.iter().map(|site| site.line).collect()))
            .collect();
        assert_eq!(
            edges,
            [
                ("error", vec![1]),
                ("flat", vec![5]),
                ("metric", vec![1]),
                ("top_k", vec![3]),
                ("visited", vec![7])
            ]
        );
    }
}

//! Cycles of a graph: the strongly connected components and the elementary cycles.

use std::collections::{BTreeMap, BTreeSet};

/// One folder's edges: from node -> to node -> the paths that make the edge.
pub(crate) type Edges = BTreeMap<String, BTreeMap<String, BTreeSet<String>>>;

/// A graph: node -> the nodes it has an edge to.
pub(crate) type Graph = BTreeMap<String, BTreeSet<String>>;

/// The graph of a folder's edges, without the paths that make them.
pub(crate) fn graph(edges: &Edges) -> Graph {
    edges
        .iter()
        .map(|(from, to)| (from.clone(), to.keys().cloned().collect()))
        .collect()
}

/// A cycle written in order, back to its first node: `a -> b -> a`.
pub(crate) fn cycle_text(cycle: &[String]) -> String {
    let mut names = cycle.to_vec();
    names.push(cycle[0].clone());
    names.join(" -> ")
}

/// The nodes each node reaches (itself excluded unless on a cycle).
fn reach(edges: &Graph, from: &String) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut todo: Vec<&String> = vec![from];
    while let Some(node) = todo.pop() {
        for next in edges.get(node).into_iter().flatten() {
            if seen.insert(next.clone()) {
                todo.push(next);
            }
        }
    }
    seen
}

/// The strongly connected components of more than one node, each sorted.
pub(crate) fn strongly_connected(edges: &Graph) -> Vec<BTreeSet<String>> {
    let reached: BTreeMap<&String, BTreeSet<String>> =
        edges.keys().map(|n| (n, reach(edges, n))).collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for (node, from_node) in &reached {
        if !from_node.contains(*node) || out.iter().any(|c| c.contains(*node)) {
            continue;
        }
        let component = from_node
            .iter()
            .filter(|other| reached.get(other).is_some_and(|r| r.contains(*node)))
            .cloned()
            .collect();
        out.push(component);
    }
    out
}

/// The elementary cycles of a graph (at most `limit`), each starting at its smallest
/// node, the shortest first.
pub(crate) fn elementary_cycles(edges: &Graph, limit: usize) -> Vec<Vec<String>> {
    let mut nodes: BTreeSet<&String> = edges.keys().collect();
    nodes.extend(edges.values().flatten());
    let mut out = Vec::new();
    for start in &nodes {
        // Paths from `start` through nodes greater than it: each cycle is found once, from
        // its smallest node.
        let mut stack: Vec<Vec<String>> = vec![vec![(*start).clone()]];
        while let Some(path) = stack.pop() {
            let node = &path[path.len() - 1];
            for next in edges.get(node).into_iter().flatten() {
                if next == *start {
                    if out.len() == limit {
                        return out;
                    }
                    out.push(path.clone());
                } else if next > *start && !path.contains(next) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push(longer);
                }
            }
        }
    }
    out.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
    out
}

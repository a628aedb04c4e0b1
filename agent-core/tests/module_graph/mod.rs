//! The module graph of a crate, read from its source text, and the cycles in it.
//!
//! The rule (also in `docs/architecture.md`): within each folder of a crate, no module
//! cycle. A folder is the crate root's modules, or a module's children (`foo/`). Its nodes
//! are the sibling modules, each with everything under it, plus the parent module's own
//! items as one node (the items defined in `lib.rs`, `main.rs`, `foo/mod.rs` or `foo.rs`,
//! named by that file). An edge A -> B is a path in A's code that names something defined
//! in B: `crate::b::..`, `super::b::..`, `super::Item` where `Item` is defined in the
//! parent's own file, `b::..` or `use b::..` in the parent. A name re-exported by a
//! module (`pub use b::Item`, or a plain `use` a child reaches through `super::`) counts
//! as defined where the re-export leads. A path counts at the innermost folder holding
//! both ends: `crate::stream::X` in `runner/turn.rs` is the edge runner -> stream of the
//! crate root's folder. A `mod b;` declaration alone is not an edge. Code under
//! `#[cfg(test)]` and comments are not read (the caller strips them). Paths to other
//! crates (`std::`, `agent_core::`) are not edges. Each cycle is an elementary cycle of
//! one folder's graph: `agent-store/src/: db -> lib.rs -> db`, starting at its smallest
//! node. Cycles are grouped in tangles: the modules of a folder that all reach one
//! another (a strongly connected component), which hold every cycle among them; a
//! tangle is what the test reports and what its allow-list names.
//!
//! It is a reader of source text, not a compiler: names made by macros resolve to the
//! file the path reaches, `use` items inside functions count as the file's, and the
//! first `super`s of a path inside an inline `mod x { .. }` stay in the file.

mod cycles;
mod scan;

use std::collections::{BTreeMap, BTreeSet};

use cycles::{Edges, Graph, cycle_text, elementary_cycles, graph, strongly_connected};
use scan::{FileScan, scan};

/// The most cycles one folder may report before the search stops (it is exponential in
/// the worst case; a folder with this many cycles needs a look, not a list).
const MAX_CYCLES: usize = 2000;

/// One file module of a crate.
#[derive(Debug)]
struct Module {
    path: Vec<String>,
    /// The file, relative to the crate's folder.
    file: String,
    /// The folder its child modules' files are in.
    dir: String,
    parent: Option<usize>,
    children: BTreeMap<String, usize>,
    scan: FileScan,
}

/// What a path names: a module, or an item defined in a module's own file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Module(usize),
    Item(usize),
}

impl Target {
    fn module(self) -> usize {
        match self {
            Target::Module(m) | Target::Item(m) => m,
        }
    }
}

/// The file modules of one crate (one root: a library, a binary, an example).
#[derive(Debug)]
pub(crate) struct ModuleTree {
    label: String,
    modules: Vec<Module>,
}

fn file_name(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

fn parent_dir(file: &str) -> &str {
    file.rsplit_once('/').map_or("", |(dir, _)| dir)
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

impl ModuleTree {
    /// Reads the modules declared from `root` (a key of `files`: the code of each file,
    /// comments and test code already stripped, keyed by its path relative to the crate's
    /// folder). `label` names the crate in cycles. A declared module whose file is not in
    /// `files` is an error.
    pub(crate) fn load(
        label: &str,
        files: &BTreeMap<String, String>,
        root: &str,
    ) -> Result<Self, String> {
        let mut tree = ModuleTree {
            label: label.to_owned(),
            modules: Vec::new(),
        };
        let code = files
            .get(root)
            .ok_or_else(|| format!("{label}: no root {root}"))?;
        tree.modules.push(Module {
            path: Vec::new(),
            file: root.to_owned(),
            dir: parent_dir(root).to_owned(),
            parent: None,
            children: BTreeMap::new(),
            scan: scan(code),
        });
        let mut next = 0;
        while next < tree.modules.len() {
            let dir = tree.modules[next].dir.clone();
            for name in tree.modules[next].scan.declared.clone() {
                let flat = join(&dir, &format!("{name}.rs"));
                let nested = join(&dir, &format!("{name}/mod.rs"));
                let (file, child_dir) = if files.contains_key(&flat) {
                    (flat, join(&dir, &name))
                } else if files.contains_key(&nested) {
                    (nested, join(&dir, &name))
                } else {
                    return Err(format!(
                        "{label}: `mod {name};` has no file ({flat} or {nested})"
                    ));
                };
                let mut path = tree.modules[next].path.clone();
                path.push(name.clone());
                let index = tree.modules.len();
                tree.modules.push(Module {
                    path,
                    scan: scan(&files[&file]),
                    file,
                    dir: child_dir,
                    parent: Some(next),
                    children: BTreeMap::new(),
                });
                tree.modules[next].children.insert(name, index);
            }
            next += 1;
        }
        Ok(tree)
    }

    /// What `name` names in module `m`'s scope, if anything of this crate.
    fn lookup(&self, m: usize, name: &str, seen: &mut BTreeSet<(usize, String)>) -> Option<Target> {
        let module = &self.modules[m];
        if let Some(&child) = module.children.get(name) {
            return Some(Target::Module(child));
        }
        if !seen.insert((m, name.to_owned())) {
            // Back where the search started (`pub(crate) use name;` of a macro of this
            // file, globs that import each other): the caller falls back to the file.
            return None;
        }
        if let Some(path) = module.scan.uses.get(name) {
            return self.resolve(m, path, seen);
        }
        if module.scan.items.contains(name) {
            return Some(Target::Item(m));
        }
        for glob in &module.scan.globs {
            if let Some(Target::Module(g)) = self.resolve(m, glob, seen)
                && let Some(found) = self.lookup(g, name, seen)
            {
                return Some(found);
            }
        }
        None
    }

    /// What a path written in module `m` names, if anything of this crate.
    fn resolve(
        &self,
        m: usize,
        path: &[String],
        seen: &mut BTreeSet<(usize, String)>,
    ) -> Option<Target> {
        let (first, rest) = path.split_first()?;
        let at = match first.as_str() {
            "crate" => Target::Module(0),
            "self" => Target::Module(m),
            "super" => {
                let mut up = self.modules[m].parent?;
                let supers = rest.iter().take_while(|s| *s == "super").count();
                for _ in 0..supers {
                    up = self.modules[up].parent?;
                }
                return self.walk(Target::Module(up), &rest[supers..], seen);
            }
            name => self.lookup(m, name, seen)?,
        };
        self.walk(at, rest, seen)
    }

    /// Follows the rest of a path from `at`; a name a module's file does not show is
    /// taken to be that file's (made by a macro, say).
    fn walk(
        &self,
        mut at: Target,
        rest: &[String],
        seen: &mut BTreeSet<(usize, String)>,
    ) -> Option<Target> {
        for name in rest {
            let Target::Module(m) = at else {
                break; // `Item::Variant`, `Type::method`
            };
            at = self.lookup(m, name, seen).unwrap_or(Target::Item(m));
        }
        Some(at)
    }

    /// The node module `m` falls in, within the folder of module `folder` (an ancestor or
    /// `m` itself): `None` is the folder's own items.
    fn node_in(&self, folder: usize, m: usize) -> Option<String> {
        let depth = self.modules[folder].path.len();
        self.modules[m].path.get(depth).cloned()
    }

    /// The innermost module holding both `a` and `b`.
    fn common(&self, a: usize, b: usize) -> usize {
        let (pa, pb) = (&self.modules[a].path, &self.modules[b].path);
        let shared = pa.iter().zip(pb).take_while(|(x, y)| x == y).count();
        let mut m = a;
        while self.modules[m].path.len() > shared {
            m = self.modules[m].parent.unwrap_or(0);
        }
        m
    }

    /// Each folder's edges, by folder module: from node -> to node -> the paths that make
    /// the edge (`runner/turn.rs: super::Run`). A node is a child's name, or the folder's
    /// own file name for its own items.
    fn edges(&self) -> BTreeMap<usize, Edges> {
        let mut out: BTreeMap<usize, Edges> = BTreeMap::new();
        for (m, module) in self.modules.iter().enumerate() {
            for path in &module.scan.paths {
                let Some(target) = self.resolve(m, path, &mut BTreeSet::new()) else {
                    continue;
                };
                let t = target.module();
                let folder = self.common(m, t);
                let own = file_name(&self.modules[folder].file).to_owned();
                let from = self.node_in(folder, m).unwrap_or_else(|| own.clone());
                let to = self.node_in(folder, t).unwrap_or(own);
                if from != to {
                    let witness = format!("{}: {}", module.file, path.join("::"));
                    let witnesses = out.entry(folder).or_default().entry(from).or_default();
                    witnesses.entry(to).or_default().insert(witness);
                }
            }
        }
        out
    }

    /// Each folder that has edges, named `label/dir/`, with its edges.
    fn folders(&self) -> Vec<(String, Edges)> {
        self.edges()
            .into_iter()
            .map(|(folder, edges)| {
                let dir = &self.modules[folder].dir;
                let name = if dir.is_empty() {
                    format!("{}/", self.label)
                } else {
                    format!("{}/{dir}/", self.label)
                };
                (name, edges)
            })
            .collect()
    }

    /// Every elementary cycle of every folder, as `label/dir/: a -> b -> a` starting at
    /// the cycle's smallest node, sorted.
    pub(crate) fn cycles(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (folder, edges) in self.folders() {
            for cycle in elementary_cycles(&graph(&edges), MAX_CYCLES) {
                out.push(format!("{folder}: {}", cycle_text(&cycle)));
            }
        }
        out.sort();
        out
    }

    /// The tangles of every folder: each set of modules of one folder that all reach one
    /// another (a strongly connected component of more than one node).
    pub(crate) fn tangles(&self) -> Vec<Tangle> {
        let mut out = Vec::new();
        for (folder, edges) in self.folders() {
            for members in strongly_connected(&graph(&edges)) {
                let mut inside = Graph::new();
                let mut witnessed = Vec::new();
                for from in &members {
                    for (to, witnesses) in edges.get(from).into_iter().flatten() {
                        if members.contains(to) {
                            inside.entry(from.clone()).or_default().insert(to.clone());
                            let first = witnesses.iter().next().cloned().unwrap_or_default();
                            let more = match witnesses.len() - 1 {
                                0 => String::new(),
                                n => format!(" and {n} more"),
                            };
                            witnessed.push(format!("{from} -> {to} ({first}{more})"));
                        }
                    }
                }
                let names: Vec<String> = members.into_iter().collect();
                out.push(Tangle {
                    key: format!("{folder}: {}", names.join(", ")),
                    cycles: elementary_cycles(&inside, MAX_CYCLES)
                        .iter()
                        .map(|c| cycle_text(c))
                        .collect(),
                    edges: witnessed,
                });
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }
}

/// Modules of one folder that all reach one another.
#[derive(Debug)]
pub(crate) struct Tangle {
    /// `label/dir/: a, b, mod.rs`: the folder and the modules, sorted.
    pub(crate) key: String,
    /// Its elementary cycles, `a -> b -> a` (at most `MAX_CYCLES`).
    pub(crate) cycles: Vec<String>,
    /// Its edges, each with a path that makes it: `a -> b (a.rs: crate::b::X and 2 more)`.
    pub(crate) edges: Vec<String>,
}

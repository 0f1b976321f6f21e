//! Module circles: the modules of one crate (from its roots' `mod` declarations) as a graph
//! of the paths they name (`use` trees, `crate::`, `super::`, `self::` paths, through the
//! names an ancestor imports or re-exports), and the circles in it.
//!
//! A module may name its ancestors (they hold it) and its descendants. An edge between two
//! modules that are not in line counts between the two children of their nearest common
//! ancestor that hold them, so `a::x -> b` with `b -> a::y` is the circle `a <-> b`; a
//! strongly connected component of more than one child of a module is a circle. Test
//! modules (`#[cfg(test)] mod ..`) are left out: a test may reach anywhere.

use super::source::{tokens, Tok};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type ModPath = Vec<String>;

/// A path as written in `module`, at `file:line`.
struct Ref {
    module: ModPath,
    segs: Vec<String>,
    file: PathBuf,
    line: usize,
}

/// One crate root's module tree and what its modules name.
#[derive(Default)]
struct Tree {
    modules: BTreeSet<ModPath>,
    /// (module, name) -> the path a `use` in that module gives the name.
    imports: BTreeMap<(ModPath, String), (ModPath, Vec<String>)>,
    refs: Vec<Ref>,
}

/// A circle among the children of `parent`: their names and one edge each way (with
/// where it is written).
#[derive(Debug)]
pub struct Circle {
    pub parent: String,
    pub modules: BTreeSet<String>,
    pub edges: Vec<String>,
}

/// The circles of the crate at `dir`, whose roots are `src/lib.rs`, `src/main.rs` and
/// `src/bin/*.rs` (each its own tree).
pub fn circles(dir: &Path) -> Vec<Circle> {
    let src = dir.join("src");
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|f| f.is_file())
        .collect();
    if let Ok(bins) = std::fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = bins.flatten().map(|e| e.path()).collect();
        bins.sort();
        roots.extend(
            bins.into_iter()
                .filter(|p| p.extension() == Some("rs".as_ref())),
        );
    }
    let mut found = Vec::new();
    for root in roots {
        let mut tree = Tree::default();
        load(&mut tree, &root, Vec::new(), root.parent().expect("src/"));
        found.extend(tree.circles(dir));
    }
    found
}

/// Reads `file` as module `path` (its children's files under `dir`) and its descendants.
fn load(tree: &mut Tree, file: &Path, path: ModPath, dir: &Path) {
    let text =
        std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    let toks = tokens(&text);
    tree.modules.insert(path.clone());
    // The inline modules (`mod x { .. }`) open at each brace depth, and the
    // directory their file children live in.
    let mut inline: Vec<(usize, String)> = Vec::new();
    let mut depth = 0usize;
    let mut attr_path: Option<String> = None;
    let mut cfg_test = false;
    let here = |inline: &Vec<(usize, String)>| {
        let mut m = path.clone();
        m.extend(inline.iter().map(|(_, n)| n.clone()));
        m
    };
    let mut i = 0;
    while i < toks.len() {
        let prev_sep = i > 0 && toks[i - 1].0 == Tok::PathSep;
        match &toks[i].0 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if inline.last().is_some_and(|(d, _)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Punct('#') => {
                // `#[path = "x.rs"]` and `#[cfg(test)]`, for the next `mod`.
                match &toks[i + 1..(i + 5).min(toks.len())] {
                    [(Tok::Punct('['), _), (Tok::Ident(a), _), (Tok::Punct('='), _), (Tok::Str(p), _)]
                        if a == "path" =>
                    {
                        attr_path = Some(p.clone())
                    }
                    [(Tok::Punct('['), _), (Tok::Ident(a), _), (Tok::Punct('('), _), (Tok::Ident(t), _)]
                        if a == "cfg" && t == "test" =>
                    {
                        cfg_test = true
                    }
                    _ => {}
                }
            }
            Tok::Ident(k) if k == "mod" && !prev_sep && std::mem::take(&mut cfg_test) => {
                // A test module: tests may reach anywhere. Skip it (and its block).
                attr_path = None;
                i += 2;
                if toks.get(i).map(|t| &t.0) == Some(&Tok::Punct('{')) {
                    let mut open = 0;
                    while let Some(t) = toks.get(i) {
                        match t.0 {
                            Tok::Punct('{') => open += 1,
                            Tok::Punct('}') => open -= 1,
                            _ => {}
                        }
                        i += 1;
                        if open == 0 {
                            break;
                        }
                    }
                }
                continue;
            }
            Tok::Ident(k) if k == "mod" && !prev_sep => {
                if let Some((Tok::Ident(name), _)) = toks.get(i + 1) {
                    match toks.get(i + 2).map(|t| &t.0) {
                        Some(Tok::Punct(';')) => {
                            let mut child = here(&inline);
                            child.push(name.clone());
                            let sub: PathBuf = inline.iter().map(|(_, n)| n).collect();
                            let base = dir.join(sub);
                            let file = match attr_path.take() {
                                Some(p) => file.parent().expect("a directory").join(p),
                                None if base.join(format!("{name}.rs")).is_file() => {
                                    base.join(format!("{name}.rs"))
                                }
                                None => base.join(name).join("mod.rs"),
                            };
                            let child_dir = if file.ends_with("mod.rs") {
                                file.parent().expect("a directory").to_path_buf()
                            } else {
                                base.join(name)
                            };
                            load(tree, &file, child, &child_dir);
                            i += 3;
                            continue;
                        }
                        Some(Tok::Punct('{')) => {
                            attr_path = None;
                            depth += 1;
                            inline.push((depth, name.clone()));
                            tree.modules.insert(here(&inline));
                            i += 3;
                            continue;
                        }
                        _ => {}
                    }
                }
            }
            Tok::Ident(k) if k == "use" && !prev_sep => {
                cfg_test = false;
                let module = here(&inline);
                let mut leaves = Vec::new();
                let end = use_tree(&toks, i + 1, Vec::new(), &mut leaves);
                for (segs, alias) in leaves {
                    let name = alias.or_else(|| {
                        segs.iter()
                            .rev()
                            .find(|s| *s != "self" && *s != "*")
                            .cloned()
                    });
                    if let (Some(name), false) = (name, segs.last().is_some_and(|s| s == "*")) {
                        tree.imports
                            .insert((module.clone(), name), (module.clone(), segs.clone()));
                    }
                    tree.refs.push(Ref {
                        module: module.clone(),
                        segs,
                        file: file.to_path_buf(),
                        line: toks[i].1,
                    });
                }
                i = end;
                continue;
            }
            Tok::Ident(k)
                if matches!(k.as_str(), "crate" | "super" | "self")
                    && !prev_sep
                    && toks.get(i + 1).map(|t| &t.0) == Some(&Tok::PathSep) =>
            {
                let mut segs = vec![k.clone()];
                let mut j = i + 1;
                while let (Some(Tok::PathSep), Some(Tok::Ident(s))) =
                    (toks.get(j).map(|t| &t.0), toks.get(j + 1).map(|t| &t.0))
                {
                    segs.push(s.clone());
                    j += 2;
                }
                tree.refs.push(Ref {
                    module: here(&inline),
                    segs,
                    file: file.to_path_buf(),
                    line: toks[i].1,
                });
                i = j;
                continue;
            }
            Tok::Ident(k)
                if matches!(
                    k.as_str(),
                    "fn" | "struct" | "enum" | "impl" | "const" | "static"
                ) =>
            {
                cfg_test = false;
            }
            _ => {}
        }
        i += 1;
    }
}

/// Parses a use tree from `i` into its leaves (path, `as` name); returns the index past it.
fn use_tree(
    toks: &[(Tok, usize)],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    loop {
        match toks.get(i).map(|t| &t.0) {
            Some(Tok::PathSep) => i += 1,
            Some(Tok::Ident(s)) => {
                prefix.push(s.clone());
                i += 1;
                if toks.get(i).map(|t| &t.0) == Some(&Tok::PathSep) {
                    continue;
                }
                let mut alias = None;
                if let (Some(Tok::Ident(a)), Some(Tok::Ident(n))) =
                    (toks.get(i).map(|t| &t.0), toks.get(i + 1).map(|t| &t.0))
                {
                    if a == "as" {
                        alias = Some(n.clone());
                        i += 2;
                    }
                }
                out.push((prefix, alias));
                return skip_end(toks, i);
            }
            Some(Tok::Punct('*')) => {
                prefix.push("*".into());
                out.push((prefix, None));
                return skip_end(toks, i + 1);
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                while let Some(t) = toks.get(i).map(|t| &t.0) {
                    match t {
                        Tok::Punct('}') => break,
                        Tok::Punct(',') => i += 1,
                        _ => i = use_tree(toks, i, prefix.clone(), out),
                    }
                }
                return skip_end(toks, i + 1);
            }
            _ => return i + 1,
        }
    }
}

/// Past a `;` that ends a use item (nothing to skip inside braces).
fn skip_end(toks: &[(Tok, usize)], i: usize) -> usize {
    match toks.get(i).map(|t| &t.0) {
        Some(Tok::Punct(';')) => i + 1,
        _ => i,
    }
}

impl Tree {
    /// The deepest module `segs`, written in `module`, names (`None`: outside the crate).
    fn resolve(&self, module: &ModPath, segs: &[String], hops: usize) -> Option<ModPath> {
        let (first, rest) = segs.split_first()?;
        let mut cur = match first.as_str() {
            "crate" => Vec::new(),
            "self" => module.clone(),
            "super" => {
                let mut m = module.clone();
                m.pop()?;
                m
            }
            _ => {
                let mut m = module.clone();
                m.push(first.clone());
                if !self.modules.contains(&m) {
                    return None; // another crate, or a name in scope
                }
                m
            }
        };
        let mut rest = rest.iter();
        while let Some(s) = rest.next() {
            if s == "super" {
                cur.pop()?;
                continue;
            }
            if s == "self" || s == "*" {
                continue;
            }
            let mut next = cur.clone();
            next.push(s.clone());
            if self.modules.contains(&next) {
                cur = next;
            } else if let Some((m, p)) = self.imports.get(&(cur.clone(), s.clone())) {
                // A name an ancestor (or the module itself) imports: follow it.
                if hops > 8 || (m == module && p.as_slice() == segs) {
                    return Some(cur);
                }
                let target = self.resolve(m, p, hops + 1)?;
                let tail: Vec<String> = rest.cloned().collect();
                let mut at = target.clone();
                for t in tail {
                    at.push(t);
                    if !self.modules.contains(&at) {
                        at.pop();
                        break;
                    }
                }
                return Some(at);
            } else {
                break;
            }
        }
        Some(cur)
    }

    fn circles(&self, dir: &Path) -> Vec<Circle> {
        // parent -> child -> child -> an example edge.
        let mut levels: BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>> =
            BTreeMap::new();
        for r in &self.refs {
            let Some(to) = self.resolve(&r.module, &r.segs, 0) else {
                continue;
            };
            let k = r.module.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if k == r.module.len() || k == to.len() {
                continue; // in line: an ancestor or a descendant
            }
            let file = r.file.strip_prefix(dir).unwrap_or(&r.file);
            levels
                .entry(r.module[..k].to_vec())
                .or_default()
                .entry(r.module[k].clone())
                .or_default()
                .entry(to[k].clone())
                .or_insert_with(|| {
                    format!(
                        "{} -> {} ({}:{} `{}`)",
                        r.module[k],
                        to[k],
                        file.display(),
                        r.line,
                        r.segs.join("::")
                    )
                });
        }
        let mut out = Vec::new();
        for (parent, graph) in &levels {
            for scc in components(graph) {
                let edges = scc
                    .iter()
                    .flat_map(|a| graph.get(a).into_iter().flatten())
                    .filter(|(b, _)| scc.contains(*b))
                    .map(|(_, e)| e.clone())
                    .collect();
                out.push(Circle {
                    parent: if parent.is_empty() {
                        "crate".into()
                    } else {
                        parent.join("::")
                    },
                    modules: scc,
                    edges,
                });
            }
        }
        out
    }
}

/// The strongly connected components of more than one node (Tarjan).
fn components(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<BTreeSet<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'g str, (usize, usize)>,
        stack: Vec<&'g str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, (n, n));
        s.stack.push(v);
        for w in s.graph.get(v).into_iter().flat_map(|m| m.keys()) {
            match s.index.get(w.as_str()).copied() {
                None => {
                    visit(s, w);
                    let low = s.index[w.as_str()].1;
                    s.index.get_mut(v).expect("visited").1 = s.index[v].1.min(low);
                }
                Some((wi, _)) if s.stack.contains(&w.as_str()) => {
                    s.index.get_mut(v).expect("visited").1 = s.index[v].1.min(wi);
                }
                Some(_) => {}
            }
        }
        let (vi, low) = s.index[v];
        if vi == low {
            let mut scc = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                scc.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                s.out.push(scc);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// Writes `files` (path under the crate, text) into a fresh crate directory.
#[cfg(test)]
fn synthetic(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vtnt-arch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().expect("a directory")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
    dir
}

#[test]
fn a_circle_between_modules_is_found() {
    // `a::x` names `b` and `b` names `a::y` through the root's re-export: `a <-> b`.
    let dir = synthetic(
        "circle",
        &[
            (
                "src/lib.rs",
                "mod a;\nmod b;\nmod c;\npub use a::y::helper;\n",
            ),
            ("src/a/mod.rs", "pub mod x;\npub mod y;\n"),
            ("src/a/x.rs", "use crate::b::{self, B as _};\n"),
            ("src/a/y.rs", "pub fn helper() {}\n"),
            ("src/b.rs", "pub struct B;\nfn f() { crate::helper() }\n"),
            (
                "src/c.rs",
                "use super::b::B;\n#[cfg(test)]\nmod tests { use super::super::a; }\n",
            ),
        ],
    );
    let found = circles(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].parent, "crate");
    assert_eq!(found[0].modules, BTreeSet::from(["a".into(), "b".into()]));
    assert_eq!(
        found[0].edges,
        [
            "a -> b (src/a/x.rs:1 `crate::b::self`)",
            "b -> a (src/b.rs:2 `crate::helper`)"
        ]
    );
}

#[test]
fn an_acyclic_tree_passes() {
    // Parents and children name each other freely; siblings in one direction.
    let dir = synthetic(
        "acyclic",
        &[
            (
                "src/lib.rs",
                "mod a;\nmod b;\npub use b::B;\nfn f() { a::g(); }\n",
            ),
            (
                "src/a.rs",
                "mod inner;\nuse crate::B;\npub fn g() { inner::h() }\n",
            ),
            (
                "src/a/inner.rs",
                "use super::super::b;\npub fn h() { super::g() }\n",
            ),
            (
                "src/b.rs",
                "pub struct B;\n#[cfg(test)]\n#[path = \"b_tests.rs\"]\nmod tests;\n",
            ),
            ("src/b_tests.rs", "use super::*;\n"),
        ],
    );
    let found = circles(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(found.is_empty(), "{found:?}");
}

//! The shape of `src/`: no import cycles between files, lower layers never import higher ones,
//! no file over 700 lines.
//!
//! A small lexical reader, not a compiler: it strips comments, strings and `#[cfg(test)]`
//! modules, reads every `crate::`/`super::`/`self::` path and every `use` tree, follows
//! re-exports to the file that defines the item, and checks the resulting file graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Module path (`["store", "writer"]`) of every file, and its source with comments, strings and
/// test modules removed.
struct Tree {
    files: BTreeMap<Vec<String>, (PathBuf, String)>,
}

/// Top-level modules from the bottom up: a module may only use modules of a lower rank.
/// `wire` is the prost output; the binary's `cli` sits on everything.
const LAYERS: &[(&str, u32)] = &[
    ("wire", 0),
    ("object", 1),
    ("store", 2),
    ("fifo", 2),
    ("reflector", 2),
    ("distributor", 3),
    ("client", 3),
    ("sim", 3),
    ("trace", 3),
    ("election", 3),
    ("workqueue", 4),
    ("informer", 4),
    ("server", 4),
    ("factory", 5),
    ("sharding", 5),
    ("api", 6),
    ("cli", 7),
];

const MAX_LINES: usize = 700;

/// Cycles and long files allowed while a split is under way (none now). Each entry must still
/// occur, so it is removed as soon as it is fixed.
const KNOWN_CYCLES: &[&[&str]] = &[];
const KNOWN_LONG: &[&str] = &[];

fn rank(top: &str) -> Option<u32> {
    LAYERS.iter().find(|(m, _)| *m == top).map(|(_, r)| *r)
}

/// Removes comments, string and char literals (keeping newlines), so paths are only read from
/// code.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if b[i] == b'\n' {
                        out.push('\n');
                    }
                    i += 1;
                }
            }
        } else if c == b'r'
            && matches!(b.get(i + 1), Some(b'#') | Some(b'"'))
            && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_'))
        {
            // Raw string r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c as char);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == b'"'
                    && b[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&h| h == b'#')
                        .count()
                        == hashes
                {
                    j += 1 + hashes;
                    break;
                }
                if b[j] == b'\n' {
                    out.push('\n');
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                if i < b.len() && b[i] == b'\n' {
                    out.push('\n');
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let close = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..]
                    .iter()
                    .position(|&x| x == b'\'')
                    .map(|p| i + 2 + p)
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    out.push_str("' '");
                    i = end + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            // Copy one UTF-8 character.
            let len = src[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&src[i..i + len]);
            i += len;
        }
    }
    out
}

/// Removes `#[cfg(test)]` items (test modules may reach anywhere).
fn strip_test_items(src: &str) -> String {
    let mut out = src.to_string();
    while let Some(at) = out.find("#[cfg(test)]") {
        let rest = &out[at..];
        let open = rest.find('{');
        let semi = rest.find(';');
        let end = match (open, semi) {
            (Some(o), Some(s)) if s < o => at + s + 1,
            (Some(o), _) => {
                let mut depth = 0usize;
                let mut end = out.len();
                for (k, ch) in out[at + o..].char_indices() {
                    match ch {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = at + o + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (None, Some(s)) => at + s + 1,
            (None, None) => out.len(),
        };
        let newlines = out[at..end].matches('\n').count();
        out.replace_range(at..end, &"\n".repeat(newlines));
    }
    out
}

fn load(root: &Path) -> Tree {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    walk(root, &mut paths);
    let mut files = BTreeMap::new();
    for path in paths {
        let rel = path
            .strip_prefix(root)
            .expect("under src")
            .with_extension("");
        let mut module: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if module.last().is_some_and(|m| m == "mod") {
            module.pop();
        }
        if module == ["lib"] || module == ["main"] {
            if module == ["main"] {
                continue; // the binary is its own crate root
            }
            module.clear();
        }
        let text = std::fs::read_to_string(&path).expect("read file");
        files.insert(module, (path, strip_test_items(&strip(&text))));
    }
    Tree { files }
}

/// A path as written in one file, made absolute (from the crate root).
/// `module` is the file's own module path: `self` is `module`, `super` its parent (the same
/// for `a/b.rs` and `a/b/mod.rs`).
fn absolute(module: &[String], segs: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = module.to_vec();
    let mut rest = segs;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Expands one `use` tree (`a::{b, c::{d, e as f}}`) into (name bound, full path) pairs.
fn expand_use(tree: &str, prefix: &[String], out: &mut Vec<(String, Vec<String>)>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let mut p = prefix.to_vec();
        p.extend(head);
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut depth = 0;
        let mut start = 0;
        for (k, ch) in inner.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand_use(&inner[start..k], &p, out);
                    start = k + 1;
                }
                _ => {}
            }
        }
        expand_use(&inner[start..], &p, out);
    } else if !tree.is_empty() {
        let (path, alias) = match tree.split_once(" as ") {
            Some((p, a)) => (p.trim(), Some(a.trim())),
            None => (tree, None),
        };
        let mut p = prefix.to_vec();
        p.extend(
            path.split("::")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from),
        );
        if p.last().is_some_and(|l| l == "self") {
            p.pop();
        }
        if p.last().is_some_and(|l| l == "*") {
            return;
        }
        let name = alias
            .map(String::from)
            .or_else(|| p.last().cloned())
            .unwrap_or_default();
        out.push((name, p));
    }
}

struct UseDecl {
    public: bool,
    bindings: Vec<(String, Vec<String>)>,
}

fn uses(src: &str) -> Vec<UseDecl> {
    let mut out = Vec::new();
    let mut search = 0;
    while let Some(rel) = src[search..].find("use ") {
        let at = search + rel;
        search = at + 4;
        if at > 0 && is_ident(src[..at].chars().next_back().unwrap_or(' ')) {
            continue;
        }
        let before = src[..at].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        let Some(end) = src[at..].find(';') else {
            break;
        };
        let tree = src[at + 4..at + end].replace(['\n', '\r'], " ");
        let mut bindings = Vec::new();
        expand_use(&tree, &[], &mut bindings);
        out.push(UseDecl { public, bindings });
        search = at + end;
    }
    out
}

/// Every `crate::…`, `super::…`, `self::…` path written outside `use` declarations.
fn inline_paths(src: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if is_ident(chars[i]) && (i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':')) {
            let mut segs = Vec::new();
            let mut j = i;
            loop {
                let s = j;
                while j < chars.len() && is_ident(chars[j]) {
                    j += 1;
                }
                segs.push(chars[s..j].iter().collect::<String>());
                if j + 2 < chars.len()
                    && chars[j] == ':'
                    && chars[j + 1] == ':'
                    && is_ident(chars[j + 2])
                {
                    j += 2;
                } else {
                    break;
                }
            }
            if segs.len() > 1 && matches!(segs[0].as_str(), "crate" | "super" | "self") {
                out.push(segs);
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

struct Graph {
    /// Per module: names bound by its `use` declarations (private and public).
    bound: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
    modules: BTreeSet<Vec<String>>,
}

impl Graph {
    /// The file that defines what `path` names (following re-exports), if it is in this crate.
    fn resolve(&self, path: &[String], depth: u32) -> Option<Vec<String>> {
        if depth > 16 {
            return None;
        }
        let mut cur: Vec<String> = Vec::new();
        for (k, seg) in path.iter().enumerate() {
            let mut next = cur.clone();
            next.push(seg.clone());
            if self.modules.contains(&next) {
                cur = next;
                continue;
            }
            if let Some(target) = self.bound.get(&cur).and_then(|b| b.get(seg)) {
                let mut full = target.clone();
                full.extend(path[k + 1..].iter().cloned());
                return self.resolve(&full, depth + 1).or(Some(cur));
            }
            return Some(cur);
        }
        Some(cur)
    }
}

fn graph(tree: &Tree) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let modules: BTreeSet<Vec<String>> = tree.files.keys().cloned().collect();
    let mut bound = BTreeMap::new();
    let mut decls = BTreeMap::new();
    for (module, (_, src)) in &tree.files {
        let mut map = BTreeMap::new();
        let mut mine = Vec::new();
        for decl in uses(src) {
            for (name, p) in &decl.bindings {
                let abs = match p.first().map(String::as_str) {
                    Some("crate" | "super" | "self") => absolute(module, p),
                    // 2018 paths: a child module of this one (`use writer::Batch` in mod.rs).
                    Some(first)
                        if modules
                            .contains(&[module.clone(), vec![first.to_string()]].concat()) =>
                    {
                        Some([module.clone(), p.clone()].concat())
                    }
                    _ => None,
                };
                if let Some(abs) = abs {
                    map.insert(name.clone(), abs.clone());
                    mine.push((decl.public, abs));
                }
            }
        }
        bound.insert(module.clone(), map);
        decls.insert(module.clone(), mine);
    }
    let g = Graph { bound, modules };
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (module, (_, src)) in &tree.files {
        let mut targets: Vec<Vec<String>> = decls[module]
            .iter()
            .filter(|(public, _)| !public) // re-exports are followed, not counted
            .map(|(_, p)| p.clone())
            .collect();
        targets.extend(inline_paths(src).iter().filter_map(|p| absolute(module, p)));
        let set = edges.entry(module.clone()).or_default();
        for t in targets {
            if let Some(file) = g.resolve(&t, 0) {
                // Edges to the crate root or to an ancestor's own items are structure, not use.
                if file != *module && !file.is_empty() && !module.starts_with(&file) {
                    set.insert(file);
                }
            }
        }
    }
    edges
}

fn cycles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<Vec<String>>> {
    // Tarjan's strongly connected components.
    struct State<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        out: Vec<Vec<Vec<String>>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Vec<String>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        let edges = s.edges;
        for w in edges.get(v).into_iter().flatten() {
            if !edges.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn src_tree() -> Tree {
    load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

fn name(m: &[String]) -> String {
    m.join("/")
}

#[test]
fn no_import_cycles_between_files() {
    let edges = graph(&src_tree());
    let all = cycles(&edges);
    let as_names =
        |comp: &Vec<Vec<String>>| -> BTreeSet<String> { comp.iter().map(|m| name(m)).collect() };
    for known in KNOWN_CYCLES {
        let known: BTreeSet<String> = known.iter().map(|s| s.to_string()).collect();
        assert!(
            all.iter().any(|c| as_names(c) == known),
            "{known:?} is no longer a cycle: remove it from KNOWN_CYCLES"
        );
    }
    let found: Vec<String> = all
        .iter()
        .filter(|comp| {
            let names = as_names(comp);
            !KNOWN_CYCLES
                .iter()
                .any(|k| k.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>() == names)
        })
        .map(|comp| {
            let names: BTreeSet<String> = comp.iter().map(|m| name(m)).collect();
            let inner: Vec<String> = comp
                .iter()
                .flat_map(|a| {
                    edges[a]
                        .iter()
                        .filter(|b| comp.contains(b))
                        .map(move |b| format!("{} -> {}", name(a), name(b)))
                })
                .collect();
            format!("{names:?}: {}", inner.join(", "))
        })
        .collect();
    assert!(found.is_empty(), "import cycles:\n{}", found.join("\n"));
}

#[test]
fn lower_layers_never_import_higher_ones() {
    let edges = graph(&src_tree());
    let mut wrong = Vec::new();
    for (a, targets) in &edges {
        let Some(top_a) = a.first() else { continue };
        let ra = rank(top_a).unwrap_or_else(|| panic!("module `{top_a}` has no layer in LAYERS"));
        for b in targets {
            let top_b = &b[0];
            if top_a == top_b {
                continue;
            }
            let rb =
                rank(top_b).unwrap_or_else(|| panic!("module `{top_b}` has no layer in LAYERS"));
            if rb >= ra {
                wrong.push(format!(
                    "{} (layer {ra}) uses {} (layer {rb})",
                    name(a),
                    name(b)
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "layer inversions:\n{}", wrong.join("\n"));
}

#[test]
fn no_file_is_longer_than_the_limit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long: Vec<String> = src_tree()
        .files
        .values()
        .filter_map(|(path, _)| {
            let lines = std::fs::read_to_string(path).ok()?.lines().count();
            let rel = path
                .strip_prefix(root)
                .unwrap_or(path)
                .display()
                .to_string();
            (lines > MAX_LINES).then_some(rel)
        })
        .collect();
    for known in KNOWN_LONG {
        assert!(
            long.iter().any(|l| l == known),
            "{known} is no longer over {MAX_LINES} lines: remove it from KNOWN_LONG"
        );
    }
    long.retain(|l| !KNOWN_LONG.contains(&l.as_str()));
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// The reader itself: a cycle through a re-export and a path in a string or comment.
#[test]
fn the_reader_follows_re_exports_and_ignores_comments() {
    let m = |s: &str| {
        s.split('/')
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect::<Vec<_>>()
    };
    let file = |p: &str, src: &str| (PathBuf::from(p), strip_test_items(&strip(src)));
    let mut files = BTreeMap::new();
    files.insert(m(""), file("lib.rs", "pub mod a;"));
    files.insert(
        m("a"),
        file("a/mod.rs", "mod x; mod y; pub use x::X; pub use y::Y;"),
    );
    files.insert(m("a/x"), file("a/x.rs", "use super::Y; pub struct X(Y);"));
    files.insert(
        m("a/y"),
        file(
            "a/y.rs",
            "// use crate::a::x::X;\nconst S: &str = \"crate::a::x::X\";\npub struct Y;\n\
             fn f() -> super::X { todo!() }\n#[cfg(test)]\nmod tests { use crate::a::x::X; }",
        ),
    );
    let edges = graph(&Tree { files });
    assert_eq!(edges[&m("a/x")], BTreeSet::from([m("a/y")]));
    assert_eq!(edges[&m("a/y")], BTreeSet::from([m("a/x")]));
    assert_eq!(cycles(&edges).len(), 1);
}

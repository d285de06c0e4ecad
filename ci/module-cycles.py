#!/usr/bin/env python3
"""Circles in a crate's import graph: between its files (the default) or between its modules.

    python3 ci/module-cycles.py                         # every workspace member, file level
    python3 ci/module-cycles.py harness/src             # one crate, file level
    python3 ci/module-cycles.py harness/src cli/src     # several crates, each on its own
    python3 ci/module-cycles.py --modules harness/src   # top-level modules (the old check)
    python3 ci/module-cycles.py --modules --depth 2 harness/src  # modules one level down

File level (the default). Each .rs file of src/ is a node; a folder's `mod.rs` is the folder's
file (`perf/mod.rs` is the node of module `perf`), and `lib.rs` (or `main.rs`) is the crate root.
A file A has an edge to a file B when A names a path that resolves to B: `crate::x::b::Item`,
`super::b`, `super::super::x::b`, `self::b` (a `use` or inline, `use super::{a, b::c}` trees
included; an inline `mod tests { .. }` block counts as its file), where `b` is the file `b.rs`
or the folder `b/mod.rs`. A path is resolved to the deepest file it names; when that file does
not define the next name but imports it (`pub use child::Item;`, or a private `use` a child reads
through `super::Item`), the import is followed, so `crate::Item` re-exported by lib.rs from
`perf/budget.rs` is an edge to `perf/budget.rs`, not to the root. Edges between a file and its
own ancestors or descendants (a `mod.rs` and the files of its folder, any file and the crate
root) are structure, not dependency, and are left out: a circle is between files neither of
which contains the other, sibling files above all. Comments, doc comments and string literals
are no dependency. Glob imports (`use x::*`) are not followed: the path stops at `x`.

Module level (`--modules`). The `crate::X` edges between the top-level modules of src/ (with
`--depth 2`, modules one level down: `perf::budget`): an edge A -> B is any path `crate::B...`
or `super::B` resolving to the crate root, written in a file of module A.

Either way a circle is a strongly connected component of more than one node; each is printed
with the edges inside it and the paths that make them. The last line of the output for a crate
is `no circle` or its count of circles. Exits 1 when any crate has a circle, 2 on bad arguments.
"""
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


# --- reading Rust text ------------------------------------------------------------------------


def strip_code(text):
    """`text` with comments, string and char literals blanked (newlines kept), so that what is
    left is code: a `crate::x` in a comment or a message is no dependency."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif re.match(r'(?:b|c)?r#*"', text[i:i + 260]) and (i == 0 or not re.match(r"[A-Za-z0-9_]", text[i - 1])):
            m = re.match(r'(?:b|c)?r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"' or (c in "bc" and text.startswith('"', i + 1) and (i == 0 or not re.match(r"[A-Za-z0-9_]", text[i - 1]))):
            j = i + (1 if c == '"' else 2)
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('x', '\n', '\u{..}'); otherwise a lifetime or label, kept.
            m = re.match(r"'(?:\\(?:u\{[0-9a-fA-F]*\}|x[0-9a-fA-F]{2}|.)|[^\\'\n])'", text[i:i + 16])
            if m:
                out.append(" " * m.end())
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_tree(code, i):
    """The use tree (or plain path) starting at `code[i]`: a list of (segments, alias) pairs,
    `a::{b, c::{d as e}, self}` giving [a, b], [a, c, d] (alias e), [a]; and the end index.
    A glob gives the path up to it with alias `*`."""

    def skip_ws(j):
        while j < len(code) and code[j].isspace():
            j += 1
        return j

    def tree(j, prefix):
        out = []
        segs = list(prefix)
        while True:
            j = skip_ws(j)
            if code.startswith("{", j):
                j += 1
                while True:
                    j = skip_ws(j)
                    if code.startswith("}", j):
                        j += 1
                        break
                    sub, j = tree(j, segs)
                    out.extend(sub)
                    j = skip_ws(j)
                    if code.startswith(",", j):
                        j += 1
                return out, j
            if code.startswith("*", j):
                out.append((segs, "*"))
                return out, j + 1
            m = re.compile(IDENT).match(code, j)
            if not m:
                if segs != list(prefix):
                    out.append((segs, None))
                return out, j
            word = m.group(0)
            j = m.end()
            if word == "self" and segs and segs != ["self"] and segs[-1] not in ("super",):
                pass  # `a::{self}`: the path a itself
            else:
                segs = segs + [word]
            k = skip_ws(j)
            if code.startswith("::", k) and not code.startswith("::<", k):
                j = k + 2
                continue
            alias = None
            am = re.compile(r"\s+as\s+(" + IDENT + ")").match(code, j)
            if am:
                alias, j = am.group(1), am.end()
            out.append((segs, alias))
            return out, j

    return tree(i, [])


def inline_modules(code):
    """(start, end, name) of each inline `mod name { ... }` block of `code`."""
    found = []
    for m in re.finditer(r"\bmod\s+(" + IDENT + r")\s*\{", code):
        depth, j = 1, m.end()
        while j < len(code) and depth:
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
            j += 1
        found.append((m.start(), j, m.group(1)))
    return found


# --- the file graph ---------------------------------------------------------------------------


def read_crate(src):
    files = {}
    for dirpath, dirnames, names in os.walk(src):
        dirnames.sort()
        for n in sorted(names):
            if n.endswith(".rs"):
                p = os.path.join(dirpath, n)
                with open(p, encoding="utf-8") as f:
                    files[os.path.relpath(p, src)] = f.read()
    return files


def file_module(rel):
    """The module path of a file: `perf/budget.rs` -> (perf, budget); `perf/mod.rs` -> (perf,);
    `lib.rs` and `main.rs` -> () (the crate root)."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts in (["lib"], ["main"]):
        return ()
    return tuple(parts)


def file_graph(files):
    """Nodes (module path -> file) and edges {a: {b: {path text}}} between files."""
    roots = [r for r in files if r in ("lib.rs", "main.rs")]
    # With both lib.rs and main.rs, main.rs is another crate (the binary): lib.rs is the root.
    root = "lib.rs" if "lib.rs" in roots else (roots[0] if roots else None)
    node_file = {}
    for rel in files:
        if rel in ("lib.rs", "main.rs") and rel != root:
            continue
        node_file[file_module(rel)] = rel
    code = {rel: strip_code(files[rel]) for rel in node_file.values()}

    def longest_node(segs):
        for k in range(len(segs), -1, -1):
            if tuple(segs[:k]) in node_file:
                return tuple(segs[:k]), list(segs[k:])
        return None, None

    # Each file's imports at its own level (not inside inline modules): name -> absolute path.
    imports = {}
    for mod, rel in node_file.items():
        text = code[rel]
        inner = inline_modules(text)
        names = {}
        for m in re.finditer(r"\buse\s+", text):
            if any(s <= m.start() < e for s, e, _ in inner):
                continue
            for segs, alias in parse_tree(text, m.end())[0]:
                if alias == "*" or not segs:
                    continue
                absolute = absolute_path(mod, segs, node_file)
                if absolute is not None:
                    names[alias or absolute[-1]] = absolute
        imports[mod] = names

    def resolve(segs, seen=()):
        node, rest = longest_node(segs)
        if node is None:
            return None
        if rest and rest[0] in imports.get(node, {}) and (node, rest[0]) not in seen:
            target = imports[node][rest[0]]
            if list(target) != list(node) + [rest[0]]:
                return resolve(list(target) + rest[1:], seen + ((node, rest[0]),))
        return node

    edges = {}
    for mod, rel in node_file.items():
        text = code[rel]
        inner = inline_modules(text)
        for m in re.finditer(r"(?<![A-Za-z0-9_:])\$?(crate|self|super)(?=\s*::)", text):
            # The module the path is written in: the file, or an inline module inside it.
            here = list(mod) + [name for s, e, name in sorted(inner) if s < m.start() < e]
            for segs, _ in parse_tree(text, m.start() + (1 if text[m.start()] == "$" else 0))[0]:
                absolute = absolute_path(tuple(here), segs, node_file)
                if absolute is None:
                    continue
                b = resolve(absolute)
                if b is None or b == mod or b[: len(mod)] == mod or mod[: len(b)] == b:
                    continue
                edges.setdefault(mod, {}).setdefault(b, set()).add("::".join(segs))
    return node_file, edges


def absolute_path(here, segs, node_file):
    """`segs` as written in module `here`, from the crate root; None for another crate's path."""
    here = list(here)
    if segs[0] in ("crate", "$crate"):
        return segs[1:]
    if segs[0] == "self":
        return here + segs[1:]
    if segs[0] == "super":
        k = 0
        while k < len(segs) and segs[k] == "super":
            k += 1
        if k > len(here):
            return None
        return here[: len(here) - k] + segs[k:]
    # A relative `use child::Item` names a module declared in this file.
    if tuple(here + [segs[0]]) in node_file:
        return here + segs
    return None


# --- the module graph (the old check) ---------------------------------------------------------


def module_of(rel, depth):
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts == ["lib"] or parts == ["main"]:
        return None
    return "::".join(parts[:depth])


def module_graph(files, depth):
    modules = {module_of(r, depth) for r in files} - {None}
    edges = {}
    for rel, text in files.items():
        a = module_of(rel, depth)
        if a is None:
            continue
        code = strip_code(text)
        paths = []
        for m in re.finditer(r"(?<![A-Za-z0-9_:])\$?crate(?=\s*::)", code):
            paths += [segs[1:] for segs, _ in parse_tree(code, m.end() - 5)[0]]
        parts = rel[:-3].split(os.sep)
        if len(parts) == 1 or (len(parts) == 2 and parts[-1] == "mod"):
            for m in re.finditer(r"(?<![A-Za-z0-9_:])super(?=\s*::)", code):
                paths += [segs[1:] for segs, _ in parse_tree(code, m.start())[0]]
        for segs in paths:
            if not segs:
                continue
            b = "::".join(segs[:depth])
            if b not in modules:
                b = segs[0]
            if b in modules and b != a and not b.startswith(a + "::") and not a.startswith(b + "::"):
                edges.setdefault(a, {}).setdefault(b, set()).add(rel)
    return modules, edges


# --- circles ----------------------------------------------------------------------------------


def strongly_connected(nodes, edges):
    """Tarjan's strongly connected components, iteratively (deep graphs do not overflow)."""
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], 0
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                sccs.append(sorted(comp))
    return [c for c in sccs if len(c) > 1]


def check_files(src):
    node_file, edges = file_graph(read_crate(src))
    name = node_file.get
    circles = strongly_connected(node_file, edges)
    n_edges = sum(len(t) for t in edges.values())
    print(f"{len(node_file)} files, {n_edges} edges between files")
    for c in sorted(circles, key=lambda c: [name(x) for x in c]):
        print(f"circle of {len(c)}: {', '.join(sorted(name(x) for x in c))}")
        members = set(c)
        for a in sorted(c, key=name):
            for b, via in sorted(edges.get(a, {}).items(), key=lambda e: name(e[0])):
                if b in members:
                    print(f"  {name(a)} -> {name(b)}   ({', '.join(sorted(via))})")
    return circles


def check_modules(src, depth):
    modules, edges = module_graph(read_crate(src), depth)
    circles = strongly_connected(modules, edges)
    n_edges = sum(len(t) for t in edges.values())
    print(f"{len(modules)} modules, {n_edges} edges")
    for c in sorted(circles):
        print(f"circle of {len(c)}: {', '.join(c)}")
        members = set(c)
        for a in c:
            for b, via in sorted(edges.get(a, {}).items()):
                if b in members:
                    print(f"  {a} -> {b}   ({', '.join(sorted(via))})")
    return circles


def workspace_sources():
    """The src/ of every member of the workspace this script belongs to (its Cargo.toml)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "Cargo.toml"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^members\s*=\s*\[([^\]]*)\]", text, re.M)
    members = re.findall(r'"([^"]+)"', m.group(1)) if m else []
    return [os.path.relpath(os.path.join(root, mem, "src")) for mem in members
            if os.path.isdir(os.path.join(root, mem, "src"))]


def main(argv):
    args = list(argv)
    depth, modules = 1, False
    if "--modules" in args:
        modules = True
        args.remove("--modules")
    if "--depth" in args:
        i = args.index("--depth")
        if i + 1 >= len(args) or not args[i + 1].isdigit() or int(args[i + 1]) < 1:
            print("--depth takes a number of at least 1", file=sys.stderr)
            return 2
        depth, modules = int(args[i + 1]), True
        del args[i : i + 2]
    unknown = [a for a in args if a.startswith("-")]
    if unknown:
        print(f"unknown option {unknown[0]} (see the docstring: --modules, --depth N)", file=sys.stderr)
        return 2
    sources = args or workspace_sources()
    missing = [s for s in sources if not os.path.isdir(s)]
    if missing:
        print(f"{missing[0]}: no such directory", file=sys.stderr)
        return 2
    failed = False
    for src in sources:
        if len(sources) > 1:
            print(f"== {src}")
        circles = check_modules(src, depth) if modules else check_files(src)
        print(f"{len(circles)} circle{'s' if len(circles) != 1 else ''}" if circles else "no circle")
        failed |= bool(circles)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

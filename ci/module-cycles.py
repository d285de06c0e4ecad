#!/usr/bin/env python3
"""The `crate::X` edges between the top-level modules of a crate's src/ and the circles they
make (strongly connected components of more than one module).

    python3 ci/module-cycles.py harness/src           # edges and circles
    python3 ci/module-cycles.py harness/src --depth 2 # modules one level down (perf::budget)

An edge A -> B is any path `crate::B...` (in a `use` or inline, `use crate::{B, ..}` included)
or `super::B` resolving to the crate root, written in a file of module A. Exits 1 when there
is a circle.
"""
import os
import re
import sys


def module_of(rel, depth):
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts == ["lib"] or parts == ["main"]:
        return None
    return "::".join(parts[:depth])


def names_after(text, prefix_re):
    """Every first (and, with depth 2, second) path segment after `crate::`."""
    out = []
    for m in re.finditer(prefix_re + r"(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)?)", text):
        body = m.group(1)
        if body.startswith("{"):
            # `crate::{a, b::c, d::{e, f}}`: the first segments at the top level of the braces.
            inner, level, cur, items = body[1:-1], 0, "", []
            for ch in inner:
                if ch == "{":
                    level += 1
                elif ch == "}":
                    level -= 1
                if ch == "," and level == 0:
                    items.append(cur)
                    cur = ""
                else:
                    cur += ch
            items.append(cur)
            out.extend(i.strip() for i in items if i.strip())
        else:
            out.append(body)
    return out


def main():
    args = sys.argv[1:]
    depth = 1
    if "--depth" in args:
        i = args.index("--depth")
        depth = int(args[i + 1])
        del args[i : i + 2]
    src = args[0] if args else "harness/src"
    files = {}
    for dirpath, _, names in os.walk(src):
        for n in names:
            if n.endswith(".rs"):
                p = os.path.join(dirpath, n)
                files[os.path.relpath(p, src)] = open(p, encoding="utf-8").read()
    modules = {module_of(r, depth) for r in files} - {None}
    edges = {}
    for rel, text in files.items():
        a = module_of(rel, depth)
        if a is None:
            continue
        # Comments and doc comments are no dependency.
        code = re.sub(r"//[^\n]*", "", text)
        paths = names_after(code, r"\bcrate::")
        parts = rel[:-3].split(os.sep)
        if len(parts) == 1 or (len(parts) == 2 and parts[-1] == "mod"):
            paths += names_after(code, r"(?<![A-Za-z0-9_:])super::")
        for p in paths:
            segs = [s.strip() for s in p.split("::")]
            b = "::".join(segs[:depth])
            if b not in modules:
                b = segs[0]
            if b in modules and b != a and not b.startswith(a + "::") and not a.startswith(b + "::"):
                edges.setdefault(a, {}).setdefault(b, set()).add(rel)
    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(modules):
        if v not in index:
            visit(v)
    circles = [c for c in sccs if len(c) > 1]
    n_edges = sum(len(t) for t in edges.values())
    print(f"{len(modules)} modules, {n_edges} edges")
    for c in sorted(circles):
        print(f"circle of {len(c)}: {', '.join(c)}")
        members = set(c)
        for a in c:
            for b, via in sorted(edges.get(a, {}).items()):
                if b in members:
                    print(f"  {a} -> {b}   ({', '.join(sorted(via))})")
    if not circles:
        print("no circle")
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Rust files over 800 lines that do not say why they are one concern.

    python3 ci/file-size.py                      # every tracked .rs file of the repository
    python3 ci/file-size.py reference harness    # the .rs files under these folders (or files)
    python3 ci/file-size.py --limit 600 harness  # another limit
    python3 ci/file-size.py --pending reference  # list those under reference/, fail on the rest

One concern per file (README, "House rules"): a file over the limit (800 lines) is a room that
holds several concerns, unless its opening comment says why it is one. The opening comment is
the comment lines (`//!` or `//`) at the top of the file, before its first line of code (blank
lines and inner attributes such as `#![allow(..)]` may sit among them). It says why with the
marker `One concern:` followed by the reason, at least three words, e.g.

    //! One concern: the exhaustive table of the 256 E4M3 codes and their expected values.

A file that marks itself without a reason, or whose marker sits below its first line of code,
is listed like one without. With no argument the files are the repository's tracked and
not-ignored .rs files (`git ls-files`); a folder named means every .rs file under it that is not
under a `target/` folder. Prints each file listed
with its line count, largest first; the last line is `no file over N lines without a reason`
or their count. Exits 1 when any is listed, 2 on bad arguments. `--pending PATH` (repeatable)
marks the files under PATH that are still being split: they are listed with `(pending)` and do
not make the exit status 1 (CI names the folders whose files another change is splitting).
"""
import os
import re
import subprocess
import sys

LIMIT = 800
MARKER = re.compile(r"One concern:\s*(\S+(?:\s+\S+){2,})")


def opening_comment(text):
    """The comment lines at the top of `text`, before its first line of code."""
    lines = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("//"):
            lines.append(s.lstrip("/!").strip())
        elif s == "" or s.startswith("#!["):
            continue
        else:
            break
    return " ".join(lines)


def says_why(text):
    return MARKER.search(opening_comment(text)) is not None


def walk(folder):
    """The .rs files under `folder`, none under a `target/` or `.git/` folder."""
    out = []
    for dirpath, dirnames, names in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d not in ("target", ".git")]
        out += [os.path.join(dirpath, n) for n in names if n.endswith(".rs")]
    return out


def rust_files(paths):
    """The files named, the .rs files under the folders named, or with none named the
    repository's tracked and not-ignored .rs files."""
    if paths:
        files = []
        for p in paths:
            files += [p] if os.path.isfile(p) else walk(p)
        return sorted({os.path.normpath(f) for f in files})
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.rs"],
            cwd=root, capture_output=True, text=True, check=True,
        ).stdout.split("\0")
        files = [os.path.relpath(os.path.join(root, f)) for f in listed if f]
    except (OSError, subprocess.CalledProcessError):
        files = [os.path.relpath(f) for f in walk(root)]
    return sorted(f for f in files if os.path.isfile(f))


def main(argv):
    args = list(argv)
    limit = LIMIT
    if "--limit" in args:
        i = args.index("--limit")
        if i + 1 >= len(args) or not args[i + 1].isdigit():
            print("--limit takes a number of lines", file=sys.stderr)
            return 2
        limit = int(args[i + 1])
        del args[i : i + 2]
    pending = []
    while "--pending" in args:
        i = args.index("--pending")
        if i + 1 >= len(args):
            print("--pending takes a file or folder", file=sys.stderr)
            return 2
        pending.append(os.path.normpath(args[i + 1]))
        del args[i : i + 2]
    unknown = [a for a in args if a.startswith("-")]
    if unknown:
        print(f"unknown option {unknown[0]} (see the docstring: --limit N)", file=sys.stderr)
        return 2
    missing = [a for a in args if not os.path.exists(a)]
    if missing:
        print(f"{missing[0]}: no such file or folder", file=sys.stderr)
        return 2
    listed = []
    for f in rust_files(args):
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        n = len(text.splitlines())
        if n > limit and not says_why(text):
            listed.append((n, f))
    def is_pending(f):
        f = os.path.normpath(f)
        return any(f == p or f.startswith(p + os.sep) for p in pending)

    failing = 0
    for n, f in sorted(listed, key=lambda x: (-x[0], x[1])):
        if is_pending(f):
            print(f"{n:6} {f} (pending)")
        else:
            print(f"{n:6} {f}")
            failing += 1
    if failing:
        print(f"{failing} file{'s' if failing != 1 else ''} over {limit} lines without "
              f"`One concern:` and a reason in the opening comment")
        return 1
    if listed:
        print(f"no file over {limit} lines without a reason but {len(listed)} pending")
        return 0
    print(f"no file over {limit} lines without a reason")
    return 0

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Merges the JUnit files of the test shards into one report (the test suites of every shard,
with the totals summed), so a CI system that publishes one file shows every trial once.

Usage: merge-junit.py OUT.xml SHARD.xml [SHARD.xml ...]   (standard library only)
Exits 2 when an input is missing or not JUnit XML, naming the file.
"""
import sys
import xml.etree.ElementTree as ET


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out, inputs = argv[1], argv[2:]
    merged = ET.Element("testsuites", name="conform")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for path in inputs:
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError) as e:
            print("merge-junit: %s: %s" % (path, e), file=sys.stderr)
            return 2
        suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
        if root.tag not in ("testsuite", "testsuites"):
            print("merge-junit: %s: not JUnit XML (root <%s>)" % (path, root.tag), file=sys.stderr)
            return 2
        for suite in suites:
            merged.append(suite)
            for key in totals:
                totals[key] += int(suite.get(key, "0") or 0)
    for key, value in totals.items():
        merged.set(key, str(value))
    ET.ElementTree(merged).write(out, encoding="utf-8", xml_declaration=True)
    print("merge-junit: %d file(s), %d tests, %d failures, %d errors, %d skipped -> %s"
          % (len(inputs), totals["tests"], totals["failures"], totals["errors"],
             totals["skipped"], out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

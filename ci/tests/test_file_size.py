"""Tests of ci/file-size.py on small trees written to a temporary directory.

    python3 -m unittest discover -s ci/tests    (CI runs it: .ci/run)
"""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "file-size.py")


def run(files, *flags):
    """Writes {relative path: text} into a fresh folder and runs the script on it."""
    with tempfile.TemporaryDirectory() as d:
        for rel, text in files.items():
            path = os.path.join(d, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        p = subprocess.run([sys.executable, SCRIPT, *flags, d], capture_output=True, text=True)
        return p.returncode, p.stdout.replace(d + os.sep, "")


def body(lines):
    return "".join(f"fn f{i}() {{}}\n" for i in range(lines))


class FileSize(unittest.TestCase):
    def test_a_long_file_without_a_reason_is_listed(self):
        rc, out = run({"src/big.rs": "//! Many things.\n" + body(800), "src/small.rs": body(800)})
        self.assertEqual(rc, 1, out)
        self.assertIn("   801 src/big.rs", out)
        self.assertNotIn("small.rs", out)
        self.assertIn("1 file over 800 lines", out.splitlines()[-1])

    def test_the_marker_with_a_reason_in_the_opening_comment_passes(self):
        rc, out = run({
            "a.rs": "//! The E4M3 table.\n//!\n//! One concern: the 256 codes and their values.\n" + body(900),
            "b.rs": "#![allow(dead_code)]\n\n// One concern: one exhaustive sweep, one table.\n" + body(900),
        })
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.strip(), "no file over 800 lines without a reason")

    def test_a_bare_marker_or_one_below_the_code_does_not_count(self):
        rc, out = run({
            "bare.rs": "//! One concern: yes.\n" + body(900),
            "late.rs": "use std::fmt;\n//! One concern: the codes and their values.\n" + body(900),
        })
        self.assertEqual(rc, 1, out)
        self.assertIn("bare.rs", out)
        self.assertIn("late.rs", out)

    def test_the_limit_and_target_folders(self):
        rc, out = run({"target/gen.rs": body(900), "m.rs": body(50)}, "--limit", "40")
        self.assertEqual(rc, 1, out)
        self.assertIn("    50 m.rs", out)
        self.assertNotIn("gen.rs", out)

    def test_pending_files_are_listed_without_failing(self):
        files = {"ops/big.rs": body(900), "cli/big.rs": body(900)}
        rc, out = run(files, "--pending", "nowhere")
        self.assertEqual(rc, 1, out)
        with tempfile.TemporaryDirectory() as d:
            for rel, text in files.items():
                os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
                with open(os.path.join(d, rel), "w", encoding="utf-8") as f:
                    f.write(text)
            cmd = [sys.executable, SCRIPT, "--pending", os.path.join(d, "ops"), d]
            p = subprocess.run(cmd, capture_output=True, text=True)
            self.assertEqual(p.returncode, 1, p.stdout)
            self.assertIn("ops/big.rs (pending)", p.stdout)
            self.assertIn("1 file over 800 lines", p.stdout)
            cmd[2:2] = ["--pending", os.path.join(d, "cli")]
            p = subprocess.run(cmd, capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stdout)
            self.assertIn("cli/big.rs (pending)", p.stdout)
            self.assertIn("but 2 pending", p.stdout)

    def test_bad_arguments_exit_2(self):
        rc, _ = run({}, "--limit", "many")
        self.assertEqual(rc, 2)
        p = subprocess.run([sys.executable, SCRIPT, "/nonexistent"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    unittest.main()

"""Tests of ci/module-cycles.py on small crates written to a temporary directory.

    python3 -m unittest discover -s ci/tests    (CI runs it: .ci/run)
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module-cycles.py")


class Crate:
    """A src/ tree made of {relative path: text}, run through the script."""

    def __init__(self, files):
        self.dir = tempfile.TemporaryDirectory()
        self.src = os.path.join(self.dir.name, "src")
        for rel, text in files.items():
            path = os.path.join(self.src, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(textwrap.dedent(text))

    def run(self, *flags):
        p = subprocess.run([sys.executable, SCRIPT, *flags, self.src], capture_output=True, text=True)
        self.dir.cleanup()
        return p.returncode, p.stdout


class FileLevel(unittest.TestCase):
    def test_two_sibling_files_naming_each_other_are_a_circle(self):
        rc, out = Crate({
            "lib.rs": "mod perf;\n",
            "perf/mod.rs": "mod budget;\nmod budget_text;\n",
            "perf/budget.rs": "use super::budget_text;\npub struct Budget;\n",
            "perf/budget_text.rs": "use super::budget::Budget;\n",
        }).run()
        self.assertEqual(rc, 1, out)
        self.assertIn("circle of 2: perf/budget.rs, perf/budget_text.rs", out)
        self.assertIn("perf/budget.rs -> perf/budget_text.rs   (super::budget_text)", out)
        self.assertEqual(out.strip().splitlines()[-1], "1 circle")

    def test_the_module_level_check_does_not_see_them(self):
        rc, out = Crate({
            "lib.rs": "mod perf;\n",
            "perf/mod.rs": "mod budget;\nmod budget_text;\n",
            "perf/budget.rs": "use super::budget_text;\n",
            "perf/budget_text.rs": "use super::budget::Budget;\n",
        }).run("--modules")
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.strip().splitlines()[-1], "no circle")

    def test_the_module_level_check_sees_top_level_modules_in_a_circle(self):
        rc, out = Crate({
            "lib.rs": "mod golden;\nmod perf;\n",
            "golden/mod.rs": "mod store;\n",
            "golden/store.rs": "use crate::perf::Budget;\n",
            "perf.rs": "pub struct Budget;\nfn f() { crate::golden::g(); }\n",
        }).run("--modules")
        self.assertEqual(rc, 1, out)
        self.assertIn("circle of 2: golden, perf", out)
        self.assertIn("golden -> perf   (golden/store.rs)", out)

    def test_a_folder_is_its_mod_rs_and_crate_paths_resolve_to_the_deepest_file(self):
        rc, out = Crate({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "fn f() { crate::b::c::g(); }\n",
            "b/mod.rs": "mod c;\nuse crate::a::f;\n",
            "b/c.rs": "pub fn g() {}\n",
        }).run()
        # a.rs names b/c.rs (not b/mod.rs); b/mod.rs names a.rs: no circle.
        self.assertEqual(rc, 0, out)
        rc, out = Crate({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "fn f() { crate::b::g(); }\n",
            "b/mod.rs": "use crate::a::f;\npub fn g() {}\n",
        }).run()
        self.assertEqual(rc, 1, out)
        self.assertIn("circle of 2: a.rs, b/mod.rs", out)

    def test_re_exports_are_followed_to_the_file_that_defines_the_item(self):
        rc, out = Crate({
            "lib.rs": "mod a;\nmod b;\npub use a::Thing;\n",
            "a.rs": "pub struct Thing;\nfn f() { crate::b::g(); }\n",
            "b.rs": "use crate::Thing;\npub fn g() {}\n",
        }).run()
        self.assertEqual(rc, 1, out)
        self.assertIn("b.rs -> a.rs   (crate::Thing)", out)
        # Through a folder's mod.rs and a `use` tree with braces and a rename.
        rc, out = Crate({
            "lib.rs": "mod ops;\n",
            "ops/mod.rs": "mod x;\nmod y;\npub(crate) use x::{Inner as Renamed, Other};\n",
            "ops/x.rs": "pub struct Inner;\npub struct Other;\nuse super::y::h;\n",
            "ops/y.rs": "pub fn h() {}\nfn k(_: super::Renamed) {}\n",
        }).run()
        self.assertEqual(rc, 1, out)
        self.assertIn("ops/y.rs -> ops/x.rs   (super::Renamed)", out)

    def test_a_file_and_its_own_folder_or_the_root_are_no_circle(self):
        rc, out = Crate({
            "lib.rs": "mod ops;\npub use ops::Op;\npub struct Error;\n",
            "ops/mod.rs": "mod family;\npub use family::Op;\npub struct Shared;\nfn f() -> crate::Error { crate::Error }\n",
            "ops/family.rs": "use super::Shared;\nuse crate::Error;\npub struct Op;\n",
        }).run()
        self.assertEqual(rc, 0, out)
        self.assertIn("0 edges between files", out)

    def test_comments_strings_and_globs_are_no_edge(self):
        rc, out = Crate({
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "// uses crate::b::x\n/* and super::b */\n/// see crate::b\n"
                    "const S: &str = \"crate::b::x\";\nconst R: &str = r#\"super::b\"#;\n"
                    "const C: char = '\"'; use crate::b::g;\n",
            "b.rs": "pub fn g() {}\nuse super::*;\n",
        }).run()
        self.assertEqual(rc, 0, out)
        self.assertIn("1 edges between files", out)

    def test_an_inline_module_reads_super_from_inside_its_file(self):
        rc, out = Crate({
            "lib.rs": "mod p;\n",
            "p/mod.rs": "mod a;\nmod b;\n",
            "p/a.rs": "pub fn f() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::b::g;\n}\n",
            "p/b.rs": "pub fn g() { super::a::f() }\n",
        }).run()
        self.assertEqual(rc, 1, out)
        self.assertIn("p/a.rs -> p/b.rs   (super::super::b::g)", out)

    def test_three_files_in_a_ring_and_a_clean_crate(self):
        rc, out = Crate({
            "lib.rs": "mod s;\n",
            "s/mod.rs": "mod checks;\nmod load;\nmod select;\nmod tail;\n",
            "s/checks.rs": "use crate::s::load::parse;\n",
            "s/load.rs": "use super::select::pick;\n",
            "s/select.rs": "use super::{checks::resolve, tail::t};\n",
            "s/tail.rs": "pub fn t() {}\n",
        }).run()
        self.assertEqual(rc, 1, out)
        self.assertIn("circle of 3: s/checks.rs, s/load.rs, s/select.rs", out)
        self.assertNotIn("tail.rs ->", out)

    def test_bad_arguments_exit_2(self):
        rc, _ = Crate({"lib.rs": ""}).run("--depth", "x")
        self.assertEqual(rc, 2)
        p = subprocess.run([sys.executable, SCRIPT, "/nonexistent/src"], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)


if __name__ == "__main__":
    unittest.main()

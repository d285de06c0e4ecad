"""torch_npu argument building, tested without torch or an NPU."""
import math
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "torch_npu"))

import numpy as np  # noqa: E402

import fia_args as fa  # noqa: E402


BASE = {"dtype": "bf16", "batch": 2, "q_seq": 16, "kv_seq": 32, "num_heads": 8,
        "num_key_value_heads": 2, "head_dim": 128}


class FiaArgsTest(unittest.TestCase):
    def test_defaults(self):
        kw, mask = fa.fia_kwargs("fa_prefill", BASE)
        self.assertEqual(kw["num_heads"], 8)
        self.assertEqual(kw["num_key_value_heads"], 2)
        self.assertAlmostEqual(kw["scale"], 1 / math.sqrt(128))
        self.assertEqual(kw["input_layout"], "BSND")
        self.assertEqual((kw["pre_tokens"], kw["next_tokens"]), (2147483647, 2147483647))
        self.assertIsNone(mask)
        self.assertNotIn("block_table", kw)

    def test_scale_keyword_and_kv_heads_zero(self):
        kw, _ = fa.fia_kwargs("fa_prefill", dict(BASE, num_key_value_heads=0, scale=0.5),
                              scale_keyword="scale_value")
        self.assertEqual(kw["scale_value"], 0.5)
        self.assertNotIn("scale", kw)
        self.assertEqual(kw["num_key_value_heads"], 8)

    def test_masks(self):
        _, m = fa.fia_kwargs("fa_prefill", dict(BASE, sparse_mode=3))
        self.assertEqual(m, "compressed")
        cm = fa.compressed_causal_mask()
        self.assertEqual(cm.shape, (2048, 2048))
        self.assertFalse(cm[5, 5])
        self.assertTrue(cm[5, 6])
        _, m = fa.fia_kwargs("fa_prefill", dict(BASE, atten_mask=True))
        self.assertEqual(m, "explicit")
        em = fa.explicit_mask(np.array([[[0, 1], [1, 0]]], dtype=np.uint8))
        self.assertEqual(em.shape, (1, 1, 2, 2))
        self.assertEqual(em.dtype, bool)
        with self.assertRaises(fa.ArgError):
            fa.fia_kwargs("fa_prefill", dict(BASE, atten_mask=True, sparse_mode=2))
        with self.assertRaises(fa.ArgError):
            fa.fia_kwargs("fa_prefill", dict(BASE, sparse_mode=1))

    def test_paged(self):
        p = dict(BASE, q_seq=1, block_size=128, actual_seq_lengths_kv=[100, 300])
        kw, _ = fa.fia_kwargs("pa_decode", p)
        self.assertEqual(kw["block_size"], 128)
        self.assertEqual(kw["actual_seq_lengths_kv"], [100, 300])
        with self.assertRaises(fa.ArgError):
            fa.fia_kwargs("pa_decode", dict(p, block_size=100))
        with self.assertRaises(fa.ArgError):
            fa.fia_kwargs("pa_decode", dict(p, cache_layout="BnNBsD", input_layout="TND"))
        kw, _ = fa.fia_kwargs("pa_decode", dict(p, cache_layout="BnNBsD", input_layout="BNSD"))
        self.assertEqual(kw["input_layout"], "BNSD")
        with self.assertRaises(fa.ArgError):
            fa.fia_kwargs("pa_decode", dict(BASE, q_seq=1))

    def test_tnd_and_ratio_limits(self):
        kw, _ = fa.fia_kwargs("fa_prefill", dict(BASE, input_layout="TND",
                                                 actual_seq_lengths=[3, 7],
                                                 actual_seq_lengths_kv=[3, 7]))
        self.assertEqual(kw["actual_seq_lengths"], [3, 7])
        with self.assertRaises(fa.ArgError):
            fa.fia_kwargs("fa_prefill", dict(BASE, input_layout="TND"))
        with self.assertRaises(fa.ArgError):
            fa.fia_kwargs("fa_prefill", dict(BASE, num_heads=130, num_key_value_heads=2))
        with self.assertRaises(fa.ArgError):
            fa.fia_kwargs("fa_prefill", dict(BASE, num_heads=8, num_key_value_heads=3))

    def test_lse_shapes(self):
        self.assertEqual(fa.lse_from_kernel(np.zeros((2, 8, 16, 1)), "BSND").dtype, np.float32)
        with self.assertRaises(fa.ArgError):
            fa.lse_from_kernel(np.zeros((2, 8, 16)), "BSND")
        fa.lse_from_kernel(np.zeros((10, 8, 1)), "TND")

    def test_mc2(self):
        cmd = fa.mc2_launch_command("py", "rank.py", 4, "/in", "/out", 29500)
        self.assertIn("--nproc_per_node=4", cmd)
        self.assertEqual(cmd[:3], ["py", "-m", "torch.distributed.run"])
        with self.assertRaises(fa.ArgError):
            fa.mc2_launch_command("py", "rank.py", 3, "/in", "/out", 1)
        x1 = np.arange(2 * 3 * 4).reshape(2, 3, 4)
        x2 = np.arange(2 * 4 * 5).reshape(2, 4, 5)
        a, b = fa.mc2_shard(x1, x2, 1)
        self.assertEqual((a.shape, b.shape), ((3, 4), (4, 5)))
        with self.assertRaises(fa.ArgError):
            fa.mc2_shard(x1, x2.reshape(2, 5, 4), 0)


class _Module:
    """A stand-in module with the given attributes (the probe only looks at names)."""

    def __init__(self, version, *names):
        self.__version__ = version
        for n in names:
            setattr(self, n, object())


FULL = ("npu_fused_infer_attention_score", "npu_dtype_cast", "float4_e2m1fn_x2",
        "npu_mm_all_reduce_base", "npu_weight_quant_batchmatmul", "_npu_reshape_and_cache",
        "npu_scatter_nd_update_", "npu_dynamic_quant", "npu_quant_matmul", "npu_trans_quant_param")
ALL_OPS = {"fa_prefill", "pa_decode", "mxfp4_dequant", "mc2_matmul_allreduce", "w4a16_matmul",
           "paged_kv", "dynamic_quant", "pa_decode_int8", "quant_matmul", "mla_decode"}


class ProbeTest(unittest.TestCase):
    def test_atlas_a2_runs_everything_but_the_fp4_cast(self):
        for name in ("Ascend910B1", "Ascend910B2C", "Ascend910B4", "Ascend910B4-1"):
            r = fa.probe(_Module("2.7.1", *FULL), name)
            self.assertEqual(set(r), {"mxfp4_dequant"}, name)
            self.assertIn("Ascend950 only", r["mxfp4_dequant"])

    def test_atlas_a3_has_no_mc2(self):
        r = fa.probe(_Module("2.7.1", *FULL), "Ascend910_9391")
        self.assertEqual(set(r), {"mxfp4_dequant", "mc2_matmul_allreduce"})
        self.assertIn("Atlas A2 only", r["mc2_matmul_allreduce"])

    def test_ascend950_runs_the_fp4_cast_and_w4a16_only(self):
        r = fa.probe(_Module("26.0.0", *FULL), "Ascend950PR")
        self.assertEqual(set(r), {"fa_prefill", "pa_decode", "mc2_matmul_allreduce", "paged_kv",
                                  "dynamic_quant", "pa_decode_int8", "quant_matmul",
                                  "mla_decode"})
        self.assertIn("npu_dynamic_quant", r["dynamic_quant"])

    def test_first_generation_names_do_not_slip_through_a_prefix(self):
        # "Ascend910B" is a first-generation part; only Ascend910B1..B4 are Atlas A2.
        for name in ("Ascend910A", "Ascend910B", "Ascend910ProA", "Ascend910ProB",
                     "Ascend910PremiumA", "Ascend310P3", "Ascend310B1", "SomethingNew"):
            r = fa.probe(_Module("2.7.1", *FULL), name)
            self.assertEqual(set(r), ALL_OPS, name)
            self.assertIn(name, r["fa_prefill"])
        self.assertIsNone(fa.product_family("Ascend910B"[:-1] + "B5"))
        self.assertEqual(fa.product_family("Ascend910ProB"), "Atlas training (first generation)")

    def test_missing_apis_name_the_version(self):
        m = _Module("2.1.0.post8", "npu_fused_infer_attention_score", "npu_dtype_cast",
                    "npu_mm_all_reduce_base")
        r = fa.probe(m, "Ascend910B4")
        self.assertEqual(set(r), {"mxfp4_dequant", "w4a16_matmul", "paged_kv", "dynamic_quant",
                                  "pa_decode_int8", "quant_matmul", "mla_decode"})
        self.assertIn("npu_quant_matmul", r["quant_matmul"])
        self.assertIn("2.1.0.post8", r["mxfp4_dequant"])
        self.assertIn("has no npu_dynamic_quant", r["dynamic_quant"])
        # FIA is there but not the INT8 cache writes a C8 decode step needs.
        self.assertIn("_npu_reshape_and_cache", r["pa_decode_int8"])
        self.assertIn("_npu_reshape_and_cache", r["mla_decode"])
        self.assertIn("26.0", r["mxfp4_dequant"])
        r = fa.probe(_Module("1.11.0"), "Ascend910B4")
        self.assertEqual(set(r), ALL_OPS)
        self.assertIn("npu_fused_infer_attention_score", r["fa_prefill"])


class FiaRulesTest(unittest.TestCase):
    """The documented rules fia_kwargs applies (aclnnFusedInferAttentionScoreV4)."""

    def test_c8_antiquant_rules(self):
        base = {"dtype": "bf16", "batch": 2, "num_heads": 8, "num_key_value_heads": 2,
                "head_dim": 64, "block_size": 32, "actual_seq_lengths_kv": [40, 33],
                "new_tokens": 2, "antiquant_offset": True}
        kw = fa.c8_kwargs(base)
        self.assertEqual((kw["key_antiquant_mode"], kw["value_antiquant_mode"]), (0, 0))
        self.assertEqual(kw["block_size"], 32)
        self.assertNotIn("new_tokens", kw)
        for bad, why in (({"block_size": 16}, "multiple of 32"),
                         ({"key_antiquant_mode": 1}, "must match"),
                         ({"value_antiquant_mode": 1}, "f16 query"),
                         ({"key_antiquant_mode": 2, "value_antiquant_mode": 2}, "0 (per-channel)")):
            with self.assertRaises(fa.ArgError) as e:
                fa.c8_kwargs(dict(base, **bad))
            self.assertIn(why, str(e.exception))
        kw = fa.c8_kwargs(dict(base, dtype="f16", value_antiquant_mode=1))
        self.assertEqual((kw["key_antiquant_mode"], kw["value_antiquant_mode"]), (0, 1))
        b, pos = fa.c8_rows(base, 4)
        self.assertEqual(list(b), [0, 0, 1, 1])
        self.assertEqual(list(pos), [38, 39, 31, 32])

    def test_mla_arguments_and_rules(self):
        base = {"dtype": "bf16", "batch": 2, "num_heads": 16, "block_size": 128,
                "actual_seq_lengths_kv": [130, 1], "new_tokens": 1, "scale": 0.0625,
                "softmax_lse_flag": True}
        kw, form = fa.mla_kwargs(base)
        self.assertEqual(form, "BnNBsD")
        self.assertEqual(kw, {"num_heads": 16, "num_key_value_heads": 1, "scale": 0.0625,
                              "input_layout": "BNSD", "sparse_mode": 0, "block_size": 128,
                              "actual_seq_lengths_kv": [130, 1], "softmax_lse_flag": True})
        kw, form = fa.mla_kwargs(dict(base, input_layout="BSND", block_size=16),
                                 scale_keyword="scale_value")
        self.assertEqual((form, kw["input_layout"], kw["scale_value"]), ("BnBsH", "BSND", 0.0625))
        self.assertNotIn("scale", kw)
        for n in (1, 2, 4, 8, 32, 64, 128):
            fa.mla_kwargs(dict(base, num_heads=n))
        for bad, why in (({"num_heads": 3}, "1, 2, 4, 8, 16, 32, 64 or 128"),
                         ({"num_heads": 256}, "1, 2, 4, 8, 16, 32, 64 or 128"),
                         ({"num_key_value_heads": 2}, "one KV head"),
                         ({"block_size": 64}, "16 or 128"),
                         ({"dtype": "f32"}, "f16 or bf16"),
                         ({"input_layout": "TND"}, "BNSD and BSND"),
                         ({"q_seq": 2}, "decode step"),
                         ({"actual_seq_lengths_kv": None}, "actual_seq_lengths_kv"),
                         ({"scale": None}, "the caller's scale")):
            with self.assertRaisesRegex(fa.ArgError, why):
                fa.mla_kwargs(dict(base, **bad))

    def test_tnd_limits(self):
        tnd = dict(BASE, input_layout="TND", batch=3, num_heads=4, num_key_value_heads=2,
                   head_dim=64, sparse_mode=3, actual_seq_lengths=[5, 21, 30],
                   actual_seq_lengths_kv=[5, 21, 30])
        with self.assertRaisesRegex(fa.ArgError, "head_dim 128 or 192"):
            fa.fia_kwargs("fa_prefill", tnd)
        ok = dict(tnd, head_dim=128, actual_seq_lengths_kv=[8, 30, 40])
        kw, mask = fa.fia_kwargs("fa_prefill", ok)
        self.assertEqual((kw["input_layout"], mask), ("TND", "compressed"))
        for bad, why in ((dict(ok, dtype="f16"), "BF16 only"),
                         (dict(ok, sparse_mode=2), "sparse_mode 0"),
                         (dict(ok, head_dim=192), "GQA"),
                         (dict(ok, head_dim=512), "query_rope"),
                         (dict(ok, actual_seq_lengths_kv=[5, 21, 30]), "below its KV length")):
            with self.assertRaisesRegex(fa.ArgError, why):
                fa.fia_kwargs("fa_prefill", bad)
        fa.fia_kwargs("fa_prefill", dict(ok, head_dim=192, num_key_value_heads=4))

    def test_inner_precise_rule(self):
        ip = lambda **p: fa.fia_kwargs("fa_prefill", dict(BASE, **p))[0]["inner_precise"]
        self.assertEqual(ip(), 0)
        self.assertEqual(ip(sparse_mode=3), 0)
        self.assertEqual(ip(atten_mask=True), 2)  # a user mask: the correction is advised
        self.assertEqual(ip(sparse_mode=3, q_seq=40, kv_seq=32), 2)  # Sq > Skv: empty rows
        self.assertEqual(ip(sparse_mode=4, pre_tokens=0, next_tokens=-1), 2)  # empty band
        self.assertEqual(ip(sparse_mode=4, pre_tokens=8, next_tokens=0), 0)
        self.assertEqual(ip(sparse_mode=3, actual_seq_lengths=[16, 9],
                            actual_seq_lengths_kv=[32, 0]), 2)  # an empty KV
        # The decode path accepts 0 and 1 only.
        kw, _ = fa.fia_kwargs("pa_decode", dict(BASE, q_seq=1, block_size=16,
                                                actual_seq_lengths_kv=[3, 0]))
        self.assertEqual(kw["inner_precise"], 0)
        self.assertEqual(ip(q_seq=1, kv_seq=1, atten_mask=True), 0)

    def test_decode_query_goes_in_as_bnsd_with_a_bnnbsd_cache(self):
        p = dict(BASE, q_seq=1, block_size=16, actual_seq_lengths_kv=[3, 9],
                 cache_layout="BnNBsD")
        kw, _ = fa.fia_kwargs("pa_decode", p)
        self.assertEqual(kw["input_layout"], "BNSD")
        kw, _ = fa.fia_kwargs("pa_decode", dict(p, cache_layout="BnBsH"))
        self.assertEqual(kw["input_layout"], "BSND")

    def test_padded_rows(self):
        self.assertEqual(fa.padded_rows(dict(BASE, actual_seq_lengths=[16, 9])), [(1, 9)])
        self.assertEqual(fa.padded_rows(BASE), [])
        self.assertEqual(fa.padded_rows(dict(BASE, input_layout="TND",
                                             actual_seq_lengths=[3, 7])), [])


class W4a16AndCacheTest(unittest.TestCase):
    def test_e2m1_reencodes_exactly_as_int8(self):
        e2m1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
        codes = np.arange(256, dtype=np.uint8).reshape(1, 256)
        w = fa.e2m1_as_int8(codes)
        self.assertEqual(w.dtype, np.int8)
        want = np.array([[e2m1[c & 15], e2m1[c >> 4]] for c in range(256)]).reshape(1, 512)
        np.testing.assert_array_equal(w.astype(np.float64) / 2, want)
        hf = fa.e2m1_as_int8(codes, "high_first")
        np.testing.assert_array_equal(hf.reshape(-1, 2)[:, ::-1], w.reshape(-1, 2))
        s = fa.e8m0_half_as_f32(np.array([0, 1, 127, 254, 255], np.uint8))
        self.assertEqual(list(s[:4]), [2.0 ** -128, 2.0 ** -127, 0.5, 2.0 ** 126])
        self.assertTrue(np.isnan(s[4]))

    def test_w4a16_rules(self):
        self.assertEqual(fa.w4a16_args({"format": "mxfp4"}, 2048), 32)
        for p, k, why in (({"format": "nvfp4"}, 768, "multiple of 32"),
                          ({"format": "mxfp4"}, 32, r"\[32, k-1\]"),
                          ({"format": "mxfp4", "dtype": "f16"}, 64, "x's dtype")):
            with self.assertRaisesRegex(fa.ArgError, why):
                fa.w4a16_args(p, k)

    def test_cache_write_index_shapes(self):
        slots = [0, 17, 33]
        self.assertEqual(fa.cache_write_plan("BnBsH", "bf16", slots, 2, 64, 16, 2)[0],
                         "reshape_and_cache")
        how, (k, v) = fa.cache_write_plan("BnBsH", "f32", slots, 2, 64, 16, 4)
        self.assertEqual((how, k.shape, k[1].tolist()), ("scatter_nd", (3, 2), [1, 1]))
        _, (k, v) = fa.cache_write_plan("BnNBsD", "bf16", slots, 2, 64, 16, 2)
        self.assertEqual(k.shape, (3, 2, 3))
        self.assertEqual(k[2, 1].tolist(), [2, 1, 1])
        _, (k, v) = fa.cache_write_plan("vllm", "bf16", slots, 2, 64, 16, 2)
        self.assertEqual((k.shape, v.shape), ((3, 2, 8, 4), (3, 2, 64, 4)))
        self.assertEqual(k[1, 1, 5].tolist(), [1, 1, 5, 1])

    def test_mc2_iteration_time_is_the_slowest_rank(self):
        self.assertEqual(fa.mc2_iteration_times([[1, 5], [3, 2]]), [3.0, 5.0])
        with self.assertRaises(fa.ArgError):
            fa.mc2_iteration_times([[1], [1, 2]])


STANDIN = os.path.join(os.path.dirname(os.path.dirname(HERE)), "torch_npu", "standin")


class StandInTest(unittest.TestCase):
    """The CPU stand-in loads only where no real torch / torch_npu exists."""

    def _import(self, extra_path):
        import subprocess
        import tempfile
        code = "import torch, torch_npu; print(torch_npu.__version__, torch_npu.STANDIN)"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([STANDIN] + extra_path))
        with tempfile.TemporaryDirectory() as cwd:
            return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd,
                                  capture_output=True, text=True)

    def test_loads_alone(self):
        r = self._import([])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("conform.standin True", r.stdout)

    def test_refuses_when_a_real_module_is_installed(self):
        import tempfile
        for name in ("torch", "torch_npu"):
            with tempfile.TemporaryDirectory() as site:
                os.makedirs(os.path.join(site, name))
                open(os.path.join(site, name, "__init__.py"), "w").close()
                r = self._import([site])
                self.assertNotEqual(r.returncode, 0, r.stdout)
                self.assertIn("refuses to load: a real `%s` is installed" % name, r.stderr)



class StandInIndependenceTest(unittest.TestCase):
    """The stand-in is built from the CANN / torch_npu documentation, not from conform: it
    imports nothing of the project (only the standard library, numpy, ml_dtypes and its own
    modules) and loads no project file by path."""

    ALLOWED = {"numpy", "ml_dtypes", "torch", "torch_npu", "_guard"}

    def test_imports_nothing_of_the_project(self):
        import ast
        stdlib = set(getattr(sys, "stdlib_module_names", ()))
        self.assertTrue(stdlib, "needs Python 3.10+ for sys.stdlib_module_names")
        files = []
        for root, _, names in os.walk(STANDIN):
            files += [os.path.join(root, n) for n in names if n.endswith(".py")]
        self.assertGreaterEqual(len(files), 6)
        for path in files:
            with open(path) as f:
                text = f.read()
            tree = ast.parse(text, path)
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    if node.level:  # relative: the stand-in's own package
                        continue
                    mods = [node.module]
                else:
                    continue
                for m in mods:
                    top = m.split(".")[0]
                    self.assertTrue(top in stdlib or top in self.ALLOWED,
                                    "%s imports %s" % (os.path.relpath(path, STANDIN), m))
            for banned in ("spec_from_file_location", "conform_", "fia_args", "targets/"):
                self.assertNotIn(banned, text, os.path.relpath(path, STANDIN))


def _standin(code, atb=True, **env):
    """Runs `code` with the stand-in's torch / torch_npu, on a host with NNAL's libatb.so on
    LD_LIBRARY_PATH (as nnal/atb/set_env.sh leaves it) or, `atb=False`, without; returns (rc,
    stdout, stderr)."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as cwd:
        lib = os.path.join(cwd, "atb-lib")
        os.mkdir(lib)
        if atb:
            open(os.path.join(lib, "libatb.so"), "w").close()
        e = dict(os.environ, PYTHONPATH=STANDIN, LD_LIBRARY_PATH=lib, **env)
        prelude = ("import numpy as np, torch, torch_npu\n"
                   "t = lambda a: torch.from_numpy(np.ascontiguousarray(a)).to('npu')\n")
        r = subprocess.run([sys.executable, "-c", prelude + code], env=e, cwd=cwd,
                           capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


class StandInSemanticsTest(unittest.TestCase):
    """What the stand-in models, from the documentation (not from conform)."""

    def test_fully_masked_rows_need_the_row_invalid_correction(self):
        code = """
rng = np.random.default_rng(1)
q, k, v = (rng.standard_normal((1, 4, 1, 64)).astype(np.float16) for _ in range(3))
k = rng.standard_normal((1, 4, 1, 64)).astype(np.float16)
mask = np.zeros((1, 1, 4, 4), bool); mask[0, 0, 1] = True  # row 1 sees nothing
for ip in (0, 2):
    o, l = torch_npu.npu_fused_infer_attention_score(
        t(q), t(k), t(v), num_heads=1, input_layout="BSND", atten_mask=t(mask),
        inner_precise=ip, softmax_lse_flag=True)
    o = o.cpu().numpy()
    print(ip, float(np.abs(o[0, 1]).max()), float(l.cpu().numpy()[0, 0, 1, 0]))
"""
        rc, out, err = _standin(code)
        self.assertEqual(rc, 0, err)
        lines = dict(line.split(" ", 1) for line in out.splitlines())
        wrong, lse0 = (float(x) for x in lines["0"].split())
        right, lse2 = (float(x) for x in lines["2"].split())
        self.assertGreater(wrong, 0.0)  # without the correction: not the documented 0
        self.assertEqual((right, lse2), (0.0, float("inf")))

    def test_padded_query_rows_are_left_unwritten(self):
        code = """
q = np.ones((2, 4, 1, 64), np.float16)
o, l = torch_npu.npu_fused_infer_attention_score(
    t(q), t(q), t(q), num_heads=1, input_layout="BSND", actual_seq_lengths=[4, 2],
    actual_seq_lengths_kv=[4, 2], softmax_lse_flag=True)
o = o.cpu().numpy().astype(np.float32)
print(bool(np.isnan(o[1, 2:]).all()), bool(np.isfinite(o[1, :2]).all()),
      bool(np.isnan(l.cpu().numpy()[1, 0, 2:]).all()))
"""
        rc, out, err = _standin(code)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.split(), ["True", "True", "True"])

    def test_documented_rejections_are_the_api_errors(self):
        code = """
q = np.ones((6, 4, 64), np.uint16)
q = torch.from_numpy(q.view(np.int16)).view(torch.bfloat16).to('npu')
try:
    torch_npu.npu_fused_infer_attention_score(
        q, q, q, num_heads=4, input_layout="TND", actual_seq_lengths=[2, 6],
        actual_seq_lengths_kv=[2, 6], sparse_mode=0)
except RuntimeError as e:
    print(e)
"""
        rc, out, err = _standin(code)
        self.assertEqual(rc, 0, err)
        self.assertIn("aclnnFusedInferAttentionScoreV4", out)
        self.assertIn("head dim 128 or 192", out)
        rc, out, err = _standin("torch_npu.npu_fused_infer_attention_score("
                                "t(np.ones((1, 2, 1, 64), np.float16)), "
                                "t(np.ones((1, 2, 1, 64), np.float16)), "
                                "t(np.ones((1, 2, 1, 64), np.float16)), num_heads=1, "
                                "input_layout='BSND')", CONFORM_STANDIN_SOC="Ascend910ProB")
        self.assertNotEqual(rc, 0)
        self.assertIn("361001", err)
        self.assertIn("Ascend910ProB", err)

    def test_mc2_adds_bias_on_the_rank_it_is_passed_to_before_rounding(self):
        # One rank: the page's formula x1 @ x2 + bias + x3, as the kernel source does it: bias
        # inside the matmul before the conversion, x3 added to the converted result and rounded
        # again.
        code = """
import torch.distributed as dist
import os
os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_PORT="1")
dist.init_process_group(backend="hccl")
hcom = dist.group.WORLD._get_backend(None).get_hccl_comm_name(0)
x1 = np.full((1, 2), 1.0, np.float16); x2 = np.full((2, 1), 1024.0, np.float16)
bias = np.array([0.75], np.float16); x3 = np.array([[0.5]], np.float16)
o = torch_npu.npu_mm_all_reduce_base(t(x1), t(x2), hcom, bias=t(bias), x3=t(x3))
print(float(o.cpu().numpy()[0, 0]))
import shutil; shutil.rmtree(torch.distributed.rendezvous_dir(hcom))
"""
        rc, out, err = _standin(code)
        self.assertEqual(rc, 0, err)
        # 2048 + 0.75 rounds to 2048 in f16 (spacing 2 there), then 2048 + 0.5 rounds to 2048
        # again; adding both in f32 before one rounding would give 2049.25 -> 2050.
        self.assertEqual(float(out), 2048.0)
        rc, out, err = _standin(code, CONFORM_STANDIN_SOC="Ascend910_9391")
        self.assertNotEqual(rc, 0)
        self.assertIn("Atlas A2 only", err)


_MLA_PRELUDE = """
import json
rng = np.random.default_rng(7)
B, N, BS, NB = 2, 4, 16, 5
lens = [20, 3]
table = np.array([[3, 1], [4, 0]], np.int32)
f16 = lambda *s: (rng.standard_normal(s) * 0.5).astype(np.float16)
q, qr = f16(B, N, 1, 512), f16(B, N, 1, 64)
kc, kr = f16(NB, 1, BS, 512), f16(NB, 1, BS, 64)
KW = dict(num_heads=N, num_key_value_heads=1, input_layout="BNSD", scale=0.07,
          block_size=BS, actual_seq_lengths_kv=lens, softmax_lse_flag=True)
def call(q=q, k=kc, v=kc, **over):
    kw = dict(KW, query_rope=t(qr), key_rope=t(kr), block_table=t(table))
    kw.update(over)
    kw = {a: b for a, b in kw.items() if b is not None}
    return torch_npu.npu_fused_infer_attention_score(t(q), t(k), t(v), **kw)
"""


class StandInMlaTest(unittest.TestCase):
    """FIA's MLA path (query_rope / key_rope) on the stand-in, from the V3 page."""

    def test_mla_scores_add_the_rope_term_and_values_are_the_latent_rows(self):
        code = _MLA_PRELUDE + """
o, l = call()
o = o.cpu().numpy().astype(np.float64); l = l.cpu().numpy()
worst = 0.0
for b in range(B):
    ids = np.arange(lens[b])
    blk, off = table[b, ids // BS], ids % BS
    c = kc[blk, 0, off].astype(np.float64); r = kr[blk, 0, off].astype(np.float64)
    for h in range(N):
        s = (q[b, h, 0].astype(np.float64) @ c.T + qr[b, h, 0].astype(np.float64) @ r.T) * 0.07
        p = np.exp(s - s.max()); want = p @ c / p.sum()
        worst = max(worst, float(np.abs(o[b, h, 0] - want).max()))
        assert abs(l[b, h, 0, 0] - (s.max() + np.log(p.sum()))) < 1e-4
# The same call without the rope term gives other numbers; BSND / BSH with the 3-D cache agree.
plain = torch_npu.npu_fused_infer_attention_score(
    t(q), t(kc), t(kc), block_table=t(table), **dict(KW, num_heads=N))[0].cpu().numpy()
qs, qrs = q.transpose(0, 2, 1, 3), qr.transpose(0, 2, 1, 3)
k3, kr3 = kc.reshape(NB, BS, 512), kr.reshape(NB, BS, 64)
bsnd = torch_npu.npu_fused_infer_attention_score(
    t(qs), t(k3), t(k3), query_rope=t(qrs), key_rope=t(kr3), block_table=t(table),
    **dict(KW, input_layout="BSND"))[0].cpu().numpy()
bsh = torch_npu.npu_fused_infer_attention_score(
    t(qs.reshape(B, 1, N * 512)), t(k3), t(k3), query_rope=t(qrs.reshape(B, 1, N * 64)),
    key_rope=t(kr3), block_table=t(table), **dict(KW, input_layout="BSH"))[0].cpu().numpy()
print(json.dumps([worst, l.shape, bool(np.array_equal(plain, o.astype(np.float16))),
                  bool(np.array_equal(bsnd.transpose(0, 2, 1, 3), o.astype(np.float16))),
                  bool(np.array_equal(bsh.reshape(B, 1, N, 512).transpose(0, 2, 1, 3),
                                      o.astype(np.float16)))]))
"""
        rc, out, err = _standin(code)
        self.assertEqual(rc, 0, err)
        import json
        worst, lse_shape, same_as_plain, bsnd_same, bsh_same = json.loads(out)
        self.assertLess(worst, 2e-3)  # one f16 rounding of values below 2
        self.assertEqual(lse_shape, [2, 4, 1, 1])
        self.assertFalse(same_as_plain)
        self.assertTrue(bsnd_same and bsh_same)

    def test_mla_refusals_are_the_page_rules(self):
        code = _MLA_PRELUDE + """
cases = {
    "no_query_rope": dict(query_rope=None),
    "no_key_rope": dict(key_rope=None),
    "heads_3": dict(num_heads=3, q=f16(B, 3, 1, 512), query_rope=t(f16(B, 3, 1, 64))),
    "kv_heads_2": dict(num_heads=4, num_key_value_heads=2),
    "block_32": dict(block_size=32, k=f16(NB, 1, 32, 512), v=None,
                     key_rope=t(f16(NB, 1, 32, 64))),
    "no_table": dict(block_table=None),
    "sparse_3": dict(sparse_mode=3, atten_mask=t(np.triu(np.ones((2048, 2048), bool), 1))),
    "rope_dtype": dict(query_rope=t(qr.astype(np.float32))),
    "rope_shape": dict(query_rope=t(f16(B, N, 1, 32))),
    "key_rope_shape": dict(key_rope=t(f16(NB, 1, BS, 32))),
    "value_shape": dict(v=f16(NB, 1, BS, 256)),
    "layout": dict(input_layout="BNSD_BSND"),
    "d128": dict(q=f16(B, N, 1, 128)),
    "q_seq_2": dict(q=f16(B, N, 2, 512), query_rope=t(f16(B, N, 2, 64))),
    "q_lengths": dict(actual_seq_lengths=[1, 1]),
}
got = {}
for name, over in cases.items():
    a = {k: over.pop(k) for k in ("q", "k", "v") if k in over}
    if "v" in a and a["v"] is None:
        a["v"] = a["k"]
    try:
        call(**a, **over)
        got[name] = "accepted"
    except RuntimeError as e:
        got[name] = str(e)
print(json.dumps(got))
"""
        rc, out, err = _standin(code)
        self.assertEqual(rc, 0, err)
        import json
        got = json.loads(out)
        want = {
            "no_query_rope": "queryRope is null, but keyRope exists",
            "no_key_rope": "keyRope is null, but queryRope exists",
            "heads_3": "1, 2, 4, 8, 16, 32, 64 or 128",
            "kv_heads_2": "the key has one head",
            "block_32": "16 or 128",
            "no_table": "PagedAttention must be enabled",
            "sparse_3": "only sparseMode 0 without a mask",
            "rope_dtype": "queryRope must have the query's dtype",
            "rope_shape": "queryRope shape",
            "key_rope_shape": "keyRope shape",
            "value_shape": "key and value shapes must be identical",
            "layout": "BNSD_BSND with queryRope/keyRope",
            "d128": "takes inputLayout TND or NTD_TND",
            "q_seq_2": "Q_S > 1",
            "q_lengths": "actualSeqLengths is supported only in TND",
        }
        self.assertEqual(set(got), set(want))
        for name, why in want.items():
            self.assertIn("aclnnFusedInferAttentionScoreV4", got[name], name)
            self.assertIn(why, got[name], name)

    def test_mla_takes_128_query_heads_over_its_one_kv_head(self):
        # The general group limit is 64; the MLA rules allow Q_N 128 with K_N 1.
        code = _MLA_PRELUDE + """
q128, qr128 = f16(B, 128, 1, 512), f16(B, 128, 1, 64)
o, l = call(q=q128, num_heads=128, query_rope=t(qr128))
print(o.shape, bool(np.isfinite(o.cpu().numpy().astype(np.float32)).all()))
try:
    torch_npu.npu_fused_infer_attention_score(
        t(q128), t(kc), t(kc), block_table=t(table), **dict(KW, num_heads=128))
except RuntimeError as e:
    print(e)
"""
        rc, out, err = _standin(code)
        self.assertEqual(rc, 0, err)
        first, second = out.splitlines()
        self.assertEqual(first, "(2, 128, 1, 512) True")
        self.assertIn("numHeads / numKeyValueHeads must be an integer <= 64", second)

    def test_reshape_and_cache_writes_latent_and_rope_rows_of_different_widths(self):
        code = """
rng = np.random.default_rng(3)
kc = np.zeros((3, 16, 1, 512), np.float16); rc = np.zeros((3, 16, 1, 64), np.float16)
kv = rng.standard_normal((2, 1, 512)).astype(np.float16)
kp = rng.standard_normal((2, 1, 64)).astype(np.float16)
tk, tr = t(kc), t(rc)
torch_npu._npu_reshape_and_cache(t(kv), t(kp), tk, tr, t(np.array([17, 2], np.int32)))
a, r = tk.cpu().numpy(), tr.cpu().numpy()
print(bool(np.array_equal(a[1, 1, 0], kv[0, 0])), bool(np.array_equal(r[0, 2, 0], kp[1, 0])),
      int((a != 0).any(axis=-1).sum()), int((r != 0).any(axis=-1).sum()))
"""
        rc, out, err = _standin(code)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.split(), ["True", "True", "2", "2"])


class AtbTest(unittest.TestCase):
    """NNAL's ATB: torch_npu's _npu_reshape_and_cache exists whatever the host has, and loads
    libatb.so on its first call; the worker probes it with a call and skips what needs it."""

    CALL = """
row = t(np.zeros((1, 1, 16), np.float16)); kc = t(np.zeros((1, 16, 1, 16), np.float16))
print(hasattr(torch_npu, "_npu_reshape_and_cache"))
try:
    torch_npu._npu_reshape_and_cache(row, row, kc, t(np.zeros((1, 16, 1, 16), np.float16)),
                                     t(np.zeros(1, np.int32)))
    print("loads")
except OSError as e:
    print(type(e).__name__, e, "|", e.__cause__)
"""

    def test_the_stand_in_raises_torch_npus_error_without_libatb(self):
        rc, out, err = _standin(self.CALL, atb=False)
        self.assertEqual(rc, 0, err)
        has, result = out.splitlines()
        self.assertEqual(has, "True")
        self.assertIn("Please check that the nnal package is installed", result)
        self.assertIn("libatb.so: cannot open shared object file", result)
        rc, out, err = _standin(self.CALL)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.split(), ["True", "loads"])

    def test_the_reason_names_what_to_install_and_the_probe_uses_it(self):
        cause = OSError("libatb.so: cannot open shared object file")
        try:
            raise OSError(None, "Please check that the nnal package is installed.") from cause
        except OSError as e:
            why = fa.atb_unavailable(e, "8.5.0", "aarch64")
        self.assertIn("Ascend-cann-nnal_8.5.0_linux-aarch64.run", why)
        self.assertIn("nnal/atb/set_env.sh", why)
        self.assertIn("libatb.so: cannot open", why)
        r = fa.probe(_Module("2.9.0", *FULL), "Ascend910B4", atb=why)
        self.assertEqual(set(r), {"mxfp4_dequant", "mla_decode"})
        self.assertEqual(r["mla_decode"], why)
        # A device FIA does not run on keeps its own reason.
        r = fa.probe(_Module("2.9.0", *FULL), "Ascend950PR", atb=why)
        self.assertIn("Ascend950PR", r["mla_decode"])

    def test_which_cases_write_through_atb(self):
        self.assertTrue(fa.needs_atb("mla_decode", {}))
        self.assertTrue(fa.needs_atb("paged_kv", {"layout": "BnBsH", "dtype": "f16"}))
        self.assertFalse(fa.needs_atb("paged_kv", {"layout": "BnBsH", "dtype": "f32"}))
        self.assertFalse(fa.needs_atb("paged_kv", {"layout": "BnNBsD", "dtype": "bf16"}))
        self.assertTrue(fa.needs_atb("pa_decode_int8", {}))
        self.assertFalse(fa.needs_atb("pa_decode_int8", {"cache_layout": "BnNBsD"}))
        self.assertFalse(fa.needs_atb("pa_decode", {}))

    def test_toolkit_versions_for_the_handshake(self):
        never = lambda path: None  # noqa: E731
        self.assertEqual(fa.toolkit_versions({"CONFORM_CANN_RELEASE": "8.0.RC2",
                                              "CONFORM_CANN_BUILD": "8.0.RC2.alpha001",
                                              "CONFORM_ATB_VERSION": "8.0.RC2"}, never),
                         {"CANN": "8.0.RC2 (build 8.0.RC2.alpha001)", "ATB": "8.0.RC2"})
        self.assertEqual(fa.toolkit_versions(
            {"ASCEND_HOME_PATH": "/usr/local/Ascend/cann-8.5.0"}, never), {"CANN": "8.5.0"})
        self.assertEqual(fa.toolkit_versions({"ASCEND_HOME_PATH": "/opt/x/latest"}, never), {})
        info = "    Ascend-cann-atb : 8.2.RC2\n    Ascend-cann-atb Version : 8.2.RC2.B030\n"
        got = fa.toolkit_versions(
            {"ATB_HOME_PATH": "/usr/local/Ascend/nnal/atb/latest/atb/cxx_abi_0"},
            lambda path: info if path.endswith(os.path.join("..", "..", "version.info"))
            else None)
        self.assertEqual(got, {"ATB": "8.2.RC2"})


class WorkerRulesAreTheStandInsErrorsTest(unittest.TestCase):
    """Each documented constraint the worker checks before a call (a skip naming its page) is
    one the stand-in raises as the aclnn error when the call is made anyway: a check the worker
    missed shows as an error on the stand-in, never as a pass."""

    RAISES = """
try:
    {call}
    print("no error")
except torch_npu.AclnnError as e:
    print("AclnnError", e)
"""
    MLA = ("q = t(np.zeros((1, {n}, 1, 512), np.float16)); c = t(np.zeros((2, 1, {bs}, 512), "
           "np.float16))\n"
           "qr = t(np.zeros((1, {n}, 1, 64), np.float16)); kr = t(np.zeros((2, 1, {bs}, 64), "
           "np.float16))\n"
           "bt = t(np.array([[0]], np.int32))\n")
    MLA_CALL = ("torch_npu.npu_fused_infer_attention_score(q, c, c, query_rope=qr, key_rope=kr, "
                "num_heads={n}, num_key_value_heads=1, input_layout='BNSD', block_size={bs}, "
                "block_table=bt, actual_seq_lengths_kv=[10], scale=0.1)")
    C8 = ("q = t(np.zeros((1, 2, 1, 64), np.float32)).to({qdt})\n"
          "c = t(np.zeros((2, 2, {bs}, 64), np.int8))\n"
          "ks = t(np.ones({ks}, np.float32)).to({kdt})\n"
          "vs = t(np.ones({vs}, np.float32)).to({vdt})\n"
          "bt = t(np.array([[0]], np.int32))\n")
    C8_CALL = ("torch_npu.npu_fused_infer_attention_score(q, c, c, num_heads=2, "
               "num_key_value_heads=2, input_layout='BNSD', block_size={bs}, block_table=bt, "
               "actual_seq_lengths_kv=[10], key_antiquant_scale=ks, value_antiquant_scale=vs, "
               "key_antiquant_mode={km}, value_antiquant_mode={vm})")
    QMM = ("a = t(np.ones((2, 32), np.int8)); b = t(np.ones((32, 8), np.int8))\n"
           "sc = t(np.ones(8, np.float32)).to({sdt})\n")
    QMM_CALL = "torch_npu.npu_quant_matmul(a, b, sc, output_dtype={out})"
    WQ = ("x = t(np.zeros((2, 64), np.float16)); w = t(np.zeros((64, 8), np.int8))\n"
          "s = t(np.ones((4, 8), np.float16))\n")
    WQ_CALL = "torch_npu.npu_weight_quant_batchmatmul(x, w, s, antiquant_group_size=16)"

    def _standin_raises(self, setup, call, needle):
        rc, out, err = _standin(setup + self.RAISES.format(call=call))
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith("AclnnError"), out)
        self.assertIn(needle, out)

    def test_each_rule_is_raised_by_the_stand_in(self):
        mla = {"dtype": "f16", "num_heads": 16, "block_size": 128, "scale": 0.1,
               "actual_seq_lengths_kv": [10]}
        c8 = {"dtype": "f16", "input_layout": "BNSD", "batch": 1, "num_heads": 2,
              "num_key_value_heads": 2, "head_dim": 64, "block_size": 32,
              "cache_layout": "BnNBsD", "actual_seq_lengths_kv": [10]}
        # Per-channel (1, N, 1, D) scales of the query's dtype; per-token (1, B, S) f32 ones.
        chan, tok = "(1, 2, 1, 64)", "(1, 1, 32)"
        f16, bf16, f32 = "torch.float16", "torch.bfloat16", "torch.float32"
        cases = [
            (lambda: fa.mla_kwargs(dict(mla, block_size=64)), fa.MlaRule,
             self.MLA.format(n=16, bs=64), self.MLA_CALL.format(n=16, bs=64), "blockSize 64"),
            (lambda: fa.mla_kwargs(dict(mla, num_heads=3)), fa.MlaRule,
             self.MLA.format(n=3, bs=128), self.MLA_CALL.format(n=3, bs=128), "numHeads 3"),
            (lambda: fa.c8_kwargs(dict(c8, key_antiquant_mode=1)), fa.FiaRule,
             self.C8.format(qdt=f16, bs=32, ks=tok, kdt=f32, vs=chan, vdt=f16),
             self.C8_CALL.format(bs=32, km=1, vm=0), "must match"),
            (lambda: fa.c8_kwargs(dict(c8, block_size=16)), fa.FiaRule,
             self.C8.format(qdt=f16, bs=16, ks=chan, kdt=f16, vs=chan, vdt=f16),
             self.C8_CALL.format(bs=16, km=0, vm=0), "multiple of 32"),
            (lambda: fa.c8_kwargs(dict(c8, dtype="bf16", value_antiquant_mode=1)), fa.FiaRule,
             self.C8.format(qdt=bf16, bs=32, ks=chan, kdt=bf16, vs=tok, vdt=f32),
             self.C8_CALL.format(bs=32, km=0, vm=1), "FLOAT16 query"),
            (lambda: fa.quant_matmul_check({"out": "f16", "scale": "bf16"}), fa.QmmRule,
             self.QMM.format(sdt="torch.bfloat16"), self.QMM_CALL.format(out="torch.float16"),
             "BFLOAT16 scale"),
            (lambda: fa.quant_matmul_check({"out": "int8", "scale": "f32"}), fa.QmmRule,
             self.QMM.format(sdt="torch.float32"), self.QMM_CALL.format(out="torch.int8"),
             "INT64 scale"),
            (lambda: fa.quant_matmul_check({"out": "f16", "scale": "f32"}), fa.QmmRule,
             self.QMM.format(sdt="torch.float32"), self.QMM_CALL.format(out="torch.float16"),
             "npu_trans_quant_param"),
            (lambda: fa.w4a16_args({"group_size": 16}, 64), fa.WqbmmRule,
             self.WQ, self.WQ_CALL, "antiquantGroupSize 16"),
        ]
        for check, rule, setup, call, needle in cases:
            with self.assertRaises(rule) as e:
                check()
            self.assertTrue(str(e.exception).endswith("(%s)" % rule.SOURCE), str(e.exception))
            self._standin_raises(setup, call, needle)
        # The table's own combinations pass the worker's check.
        for p in ({"out": "bf16", "scale": "f32", "pertoken": True, "bias": "i32"},
                  {"out": "bf16", "scale": "bf16", "bias": "bf16"},
                  {"out": "f16", "scale": "packed", "bias": "i32"},
                  {"out": "f16", "scale": "f32", "pertoken": True, "bias": "f32"},
                  {"out": "int8", "scale": "packed", "bias": "i32", "offset": True}):
            fa.quant_matmul_check(p)

    def test_moe_rules_name_the_product_constraints(self):
        p = {"ranks": 4, "bs": 6, "hidden": 256, "experts": 32, "top_k": 3}
        why = fa.moe_unsupported(p, "Ascend910B4")
        self.assertIn("ep_world_size 4: in [16, 256] and a multiple of 8 (fullmesh)", why)
        self.assertIn("Atlas A2 constraints", why)
        big = {"ranks": 16, "bs": 8, "hidden": 7168, "experts": 256, "top_k": 8}
        self.assertIsNone(fa.moe_unsupported(big, "Ascend910B4"))
        self.assertIn("H 8192: a multiple of 32 in (0, 7168] (fullmesh)",
                      fa.moe_unsupported(dict(big, hidden=8192), "Ascend910B4"))
        self.assertIsNone(fa.moe_unsupported(dict(big, hidden=8192), "Ascend910B4",
                                             hierarchy=True))
        self.assertIn("at most 24", fa.moe_unsupported(dict(big, experts=512), "Ascend910B4"))
        self.assertIn("shared experts are Atlas A3 only",
                      fa.moe_unsupported(dict(big, shared_ranks=1), "Ascend910B4"))
        self.assertIn("H 256: in [1024, 8192]", fa.moe_unsupported(p, "Ascend910_9392"))
        self.assertIsNone(fa.moe_unsupported(dict(p, hidden=1024), "Ascend910_9392"))
        self.assertTrue(fa.moe_hierarchy({"HCCL_INTRA_PCIE_ENABLE": "1",
                                          "HCCL_INTRA_ROCE_ENABLE": "0"}))
        self.assertFalse(fa.moe_hierarchy({}))


if __name__ == "__main__":
    unittest.main()

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
            fa.fia_kwargs("pa_decode", dict(p, cache_layout="BnNBsD"))  # BSND query
        kw, _ = fa.fia_kwargs("pa_decode", dict(p, cache_layout="BnNBsD", input_layout="BNSD"))
        self.assertEqual(kw["input_layout"], "BNSD")
        with self.assertRaises(fa.ArgError):
            fa.fia_kwargs("pa_decode", dict(BASE, q_seq=1))

    def test_tnd_and_ratio_limits(self):
        kw, _ = fa.fia_kwargs("fa_prefill", dict(BASE, input_layout="TND",
                                                 actual_seq_lengths=[3, 7]))
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
        "npu_mm_all_reduce_base")


class ProbeTest(unittest.TestCase):
    def test_everything_present_on_a_capable_device(self):
        self.assertEqual(fa.probe(_Module("2.7.1", *FULL), "Ascend950PR"), {})

    def test_missing_fp4_dtype_names_the_version(self):
        m = _Module("2.1.0.post8", "npu_fused_infer_attention_score", "npu_dtype_cast",
                    "npu_mm_all_reduce_base")
        r = fa.probe(m, "Ascend950PR")
        self.assertEqual(set(r), {"mxfp4_dequant"})
        self.assertIn("2.1.0.post8", r["mxfp4_dequant"])
        self.assertIn("float4_e2m1fn_x2", r["mxfp4_dequant"])

    def test_device_models_without_fp4_or_mc2(self):
        r = fa.probe(_Module("2.7.1", *FULL), "Ascend910B4")
        self.assertEqual(set(r), {"mxfp4_dequant"})
        self.assertIn("Ascend910B4", r["mxfp4_dequant"])
        r = fa.probe(_Module("2.7.1", *FULL), "Ascend310P3")
        self.assertEqual(set(r), {"mxfp4_dequant", "mc2_matmul_allreduce"})
        self.assertIn("Atlas A2/A3", r["mc2_matmul_allreduce"])

    def test_an_old_build_without_fia_or_mc2(self):
        r = fa.probe(_Module("1.11.0"), "Ascend910B4")
        self.assertEqual(set(r), {"fa_prefill", "pa_decode", "mxfp4_dequant",
                                  "mc2_matmul_allreduce"})
        self.assertIn("npu_fused_infer_attention_score", r["fa_prefill"])


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


if __name__ == "__main__":
    unittest.main()

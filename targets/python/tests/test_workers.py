"""Tests of the CPU workers' op functions (run: .venv/bin/python -m unittest discover -s
targets/python/tests). Attention is checked against a naive float64 loop written here from the
conventions; FP4 against exact Python arithmetic."""
import importlib.util
import math
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(TARGETS, "python"))

import numpy as np  # noqa: E402

import conform_attention as ca  # noqa: E402
import conform_worker as cw  # noqa: E402


def load(name):
    spec = importlib.util.spec_from_file_location("w_" + name, os.path.join(TARGETS, name, "worker.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


class FakeCase:
    def __init__(self, op, params, inputs, input_dtypes, output_dtypes):
        self.op, self.params, self.inputs = op, params, inputs
        self.input_dtypes, self.output_dtypes = input_dtypes, output_dtypes
        self.notes = []

    def note(self, t):
        self.notes.append(t)


def naive(q, k, v, g, ok_fn):
    """q [B,N,S,D], k/v [B,KVN,L,D] float64; returns out [B,N,S,D], lse [B,N,S]."""
    B, N, S, D = q.shape
    out = np.zeros((B, N, S, D))
    lse = np.full((B, N, S), np.inf)
    for b in range(B):
        ok = ok_fn(b)
        for h in range(N):
            kh = h // g.group
            for i in range(S):
                js = [j for j in range(k.shape[2]) if ok[i, j]]
                if not js:
                    continue
                s = [g.scale * float(np.dot(q[b, h, i], k[b, kh, j])) for j in js]
                m = max(s)
                e = [math.exp(x - m) for x in s]
                l = sum(e)
                out[b, h, i] = sum(w * v[b, kh, j] for w, j in zip(e, js)) / l
                lse[b, h, i] = m + math.log(l)
    return out, lse


def naive_allowed(g, b, mask):
    """The mask predicate written out element by element."""
    S, L = g.q_seq, g.kv_seq
    lq, lk = g.lq[b], g.lk[b]
    ok = np.zeros((S, L), dtype=bool)
    for i in range(lq):
        for j in range(lk):
            d = i + lk - lq
            allowed = {0: True, 2: j <= i, 3: j <= d,
                       4: d - g.pre_tokens <= j <= d + g.next_tokens}[g.sparse_mode]
            if mask is not None and mask[b, i, j]:
                allowed = False
            ok[i, j] = allowed
    return ok


def make_layout(x_bnsd, layout):
    if layout == "BSND":
        return np.ascontiguousarray(x_bnsd.transpose(0, 2, 1, 3))
    if layout in ("BNSD", "BNSD_BSND"):
        return np.ascontiguousarray(x_bnsd)
    if layout == "BSH":
        b, n, s, d = x_bnsd.shape
        return np.ascontiguousarray(x_bnsd.transpose(0, 2, 1, 3).reshape(b, s, n * d))


class AttentionTest(unittest.TestCase):
    rng = np.random.default_rng(7)

    def fa_case(self, layout, dtype, sparse, mask, n=4, kvn=2, lens=None, lse=True):
        B, S, L, D = 2, 5, 7, 8
        q = self.rng.uniform(-1, 1, (B, n, S, D))
        k = self.rng.uniform(-1, 1, (B, kvn, L, D))
        v = self.rng.uniform(-1, 1, (B, kvn, L, D))
        store = {"F32": np.float32, "F16": np.float16}[dtype]
        q, k, v = (x.astype(store).astype(np.float64) for x in (q, k, v))
        params = {"dtype": dtype.lower(), "input_layout": layout, "batch": B, "q_seq": S,
                  "kv_seq": L, "num_heads": n, "num_key_value_heads": kvn, "head_dim": D,
                  "sparse_mode": sparse, "pre_tokens": 2, "next_tokens": 1,
                  "atten_mask": mask, "softmax_lse_flag": lse}
        if lens:
            params["actual_seq_lengths"], params["actual_seq_lengths_kv"] = lens
        inputs = {"query": make_layout(q, layout).astype(store),
                  "key": make_layout(k, layout).astype(store),
                  "value": make_layout(v, layout).astype(store)}
        m = None
        if mask:
            m = (self.rng.uniform(0, 1, (B, S, L)) < 0.3).astype(np.uint8)
            inputs["atten_mask"] = m
        g = ca.Geometry(params)
        ref_out, ref_lse = naive(q, k, v, g, lambda b: naive_allowed(g, b, m))
        case = FakeCase("fa_prefill", params, inputs,
                        {"query": dtype, "key": dtype, "value": dtype, "atten_mask": "U8"},
                        {"attention_out": dtype, "softmax_lse": "F32"})
        return case, g, ref_out, ref_lse

    def check(self, worker, case, g, ref_out, ref_lse, tol):
        res = worker.attention(case)
        out = res["attention_out"].astype(np.float64)
        want = make_layout(ref_out, "BSND" if g.layout == "BNSD_BSND" else g.layout)
        self.assertEqual(out.shape, want.shape)
        np.testing.assert_allclose(out, want, atol=tol, rtol=tol)
        if "softmax_lse" in res:
            np.testing.assert_allclose(res["softmax_lse"][..., 0], ref_lse, atol=tol, rtol=tol)

    def test_numpy_and_ort_match_naive_across_layouts_and_masks(self):
        workers = [("numpy", load("numpy")), ("onnxruntime", load("onnxruntime"))]
        for layout in ["BSND", "BNSD", "BSH", "BNSD_BSND"]:
            for sparse in [0, 2, 3, 4]:
                for mask in [False, True]:
                    for dtype, tol in [("F32", 2e-5), ("F16", 2e-3)]:
                        for name, w in workers:
                            lse = name == "numpy"
                            case, g, ro, rl = self.fa_case(layout, dtype, sparse, mask,
                                                           lens=([5, 3], [7, 4]), lse=lse)
                            with self.subTest(w=name, layout=layout, sparse=sparse,
                                              mask=mask, dtype=dtype):
                                self.check(w, case, g, ro, rl, tol)

    def test_numpy_tnd(self):
        w = load("numpy")
        B, N, D = 2, 2, 8
        lq, lk = [3, 2], [4, 5]
        q = self.rng.uniform(-1, 1, (sum(lq), N, D)).astype(np.float32)
        k = self.rng.uniform(-1, 1, (sum(lk), N, D)).astype(np.float32)
        v = self.rng.uniform(-1, 1, (sum(lk), N, D)).astype(np.float32)
        params = {"dtype": "f32", "input_layout": "TND", "batch": B, "num_heads": N,
                  "head_dim": D, "sparse_mode": 3, "actual_seq_lengths": [3, 5],
                  "actual_seq_lengths_kv": [4, 9], "softmax_lse_flag": True}
        case = FakeCase("fa_prefill", params, {"query": q, "key": k, "value": v},
                        {"query": "F32"}, {"attention_out": "F32", "softmax_lse": "F32"})
        res = w.attention(case)
        g = ca.Geometry(params)
        qp = ca.tnd_to_padded(q, g.q_start, g.lq, g.q_seq).astype(np.float64)
        kp = ca.tnd_to_padded(k, g.k_start, g.lk, g.kv_seq).astype(np.float64)
        vp = ca.tnd_to_padded(v, g.k_start, g.lk, g.kv_seq).astype(np.float64)
        ro, rl = naive(qp, kp, vp, g, lambda b: naive_allowed(g, b, None))
        want = ca.padded_to_tnd(ro, g.q_start, g.lq, 5)
        np.testing.assert_allclose(res["attention_out"], want, atol=2e-5)
        self.assertEqual(res["softmax_lse"].shape, (5, N, 1))

    def test_bf16_rounds_once_from_f32(self):
        w = load("numpy")
        case, g, ro, rl = self.fa_case("BSND", "F32", 3, False)
        bits = {k: cw.f32_to_bf16_bits(v) for k, v in case.inputs.items()}
        case.inputs = bits
        case.input_dtypes = {k: "BF16" for k in bits}
        case.output_dtypes["attention_out"] = "BF16"
        res = w.attention(case)
        self.assertEqual(res["attention_out"].dtype, np.uint16)
        out = cw.bf16_bits_to_f32(res["attention_out"]).astype(np.float64)
        self.assertLess(np.max(np.abs(out - make_layout(ro, "BSND"))), 0.02)

    def test_paged_decode_gathers_through_block_table_both_layouts(self):
        workers = [load("numpy"), load("onnxruntime")]
        B, N, KVN, D, bs = 2, 4, 2, 8, 4
        lk = [6, 9]
        nb = 8
        for cache_layout in ["BnBsH", "BnNBsD"]:
            k = self.rng.uniform(-1, 1, (B, KVN, 12, D)).astype(np.float32)
            v = self.rng.uniform(-1, 1, (B, KVN, 12, D)).astype(np.float32)
            q = self.rng.uniform(-1, 1, (B, N, 1, D)).astype(np.float32)
            perm = self.rng.permutation(nb)
            bt = np.array([perm[0:3], perm[3:6]], dtype=np.int32)
            shape = (nb, bs, KVN * D) if cache_layout == "BnBsH" else (nb, KVN, bs, D)
            kc = np.full(shape, np.nan, dtype=np.float32)
            vc = np.full(shape, np.nan, dtype=np.float32)
            for b in range(B):
                for t in range(lk[b]):
                    blk, slot = bt[b, t // bs], t % bs
                    if cache_layout == "BnBsH":
                        kc[blk, slot] = k[b, :, t].reshape(-1)
                        vc[blk, slot] = v[b, :, t].reshape(-1)
                    else:
                        kc[blk, :, slot] = k[b, :, t]
                        vc[blk, :, slot] = v[b, :, t]
            params = {"dtype": "f32", "input_layout": "BNSD", "batch": B, "q_seq": 1,
                      "num_heads": N, "num_key_value_heads": KVN, "head_dim": D,
                      "actual_seq_lengths_kv": lk, "block_size": bs,
                      "cache_layout": cache_layout}
            g = ca.Geometry(params, kv_seq=12)
            ro, _ = naive(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), g,
                          lambda b: naive_allowed(g, b, None))
            for w in workers:
                case = FakeCase("pa_decode", params,
                                {"query": q, "key_cache": kc, "value_cache": vc,
                                 "block_table": bt}, {"query": "F32"},
                                {"attention_out": "F32"})
                res = w.attention(case)
                with self.subTest(layout=cache_layout, worker=w.__name__):
                    self.assertFalse(np.isnan(res["attention_out"]).any())
                    np.testing.assert_allclose(res["attention_out"], ro, atol=2e-5)
                    self.assertTrue(any("block table" in n for n in case.notes))


class PagedKvTest(unittest.TestCase):
    def test_scatter_every_layout_bitwise_with_padding(self):
        w = load("numpy")
        rng = np.random.default_rng(5)
        nb, bs, n, d, t = 4, 4, 2, 16, 6
        for layout in ["BnBsH", "BnNBsD", "vllm"]:
            for dt, store in [("BF16", np.uint16), ("F16", np.float16), ("F32", np.float32)]:
                size = np.dtype(store).itemsize
                x = 16 // size
                shapes = {"BnBsH": ((nb, bs, n * d),) * 2, "BnNBsD": ((nb, n, bs, d),) * 2,
                          "vllm": ((nb, n, d // x, bs, x), (nb, n, d, bs))}[layout]
                bits = np.dtype("u%d" % size)
                kc = rng.integers(0, 2 ** (8 * size), shapes[0], dtype=np.uint64).astype(bits).view(store)
                vc = rng.integers(0, 2 ** (8 * size), shapes[1], dtype=np.uint64).astype(bits).view(store)
                k = rng.integers(0, 2 ** (8 * size), (t, n, d), dtype=np.uint64).astype(bits).view(store)
                v = rng.integers(0, 2 ** (8 * size), (t, n, d), dtype=np.uint64).astype(bits).view(store)
                slots = rng.permutation(nb * bs)[:t].astype(np.int32)
                slots[2] = -1
                params = {"dtype": dt.lower(), "layout": layout, "num_blocks": nb,
                          "block_size": bs, "num_key_value_heads": n, "head_dim": d,
                          "num_tokens": t, "padding": 1}
                case = FakeCase("paged_kv", params,
                                {"key": k, "value": v, "slot_mapping": slots,
                                 "key_cache_in": kc, "value_cache_in": vc}, {}, {})
                before = {"key": kc.view(bits).copy(), "value": vc.view(bits).copy()}
                res = w.paged_kv(case)
                for which, rows, cin in (("key", k, kc), ("value", v, vc)):
                    want = cin.view(bits).copy()
                    for i, s in enumerate(slots):
                        if s < 0:
                            continue
                        b, sl = divmod(int(s), bs)
                        for h in range(n):
                            for e in range(d):
                                r = rows.view(bits)[i, h, e]
                                if layout == "BnBsH":
                                    want[b, sl, h * d + e] = r
                                elif layout == "BnNBsD":
                                    want[b, h, sl, e] = r
                                elif which == "key":
                                    want[b, h, e // x, sl, e % x] = r
                                else:
                                    want[b, h, e, sl] = r
                    got = res[which + "_cache_out"].view(bits)
                    with self.subTest(layout=layout, dt=dt, which=which):
                        np.testing.assert_array_equal(got, want)
                        # The input cache is not modified (the op returns a new one).
                        np.testing.assert_array_equal(cin.view(bits), before[which])


class Fp4Test(unittest.TestCase):
    def test_mxfp4_every_code_and_scale(self):
        np.seterr(over="ignore")
        w = load("ml_dtypes")
        codes = np.arange(16, dtype=np.uint8)
        e2m1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
        n = 256
        # Row r: scale r, 32 codes (each code twice); packed low nibble first.
        logical = np.tile(np.repeat(codes, 2), (n, 1))
        packed = (logical[:, 0::2] | (logical[:, 1::2] << 4)).astype(np.uint8)
        scale = np.arange(n, dtype=np.uint8).reshape(n, 1)
        for out_dt in ["F32", "BF16"]:
            case = FakeCase("mxfp4_dequant", {"dtype": out_dt.lower(), "n": n, "k": 32},
                            {"weight": packed, "scale": scale}, {}, {"out": out_dt})
            y = w.mxfp4(case)["out"]
            y = cw.bf16_bits_to_f32(y) if out_dt == "BF16" else y
            for r in range(n):
                for c in range(32):
                    code = logical[r, c]
                    mag = e2m1[code & 7] * (-1 if code & 8 else 1)
                    if r == 255:
                        self.assertTrue(math.isnan(y[r, c]))
                        continue
                    exact = mag * 2.0 ** (r - 127)
                    want = np.float32(exact)  # exact in f32 except at the extremes
                    if out_dt == "BF16":
                        want = cw.bf16_bits_to_f32(cw.f32_to_bf16_bits(np.array([exact], dtype=np.float32)))[0]
                    self.assertEqual(float(y[r, c]), float(want), (r, c, code))

    def test_nvfp4_order_b_and_numpy_tables_agree(self):
        w = load("ml_dtypes")
        import conform_fp4 as f4
        rng = np.random.default_rng(3)
        packed = rng.integers(0, 256, (4, 16), dtype=np.uint8)
        bs = rng.integers(0, 0x7E, (4, 2), dtype=np.uint8)
        g = np.array([0.37], dtype=np.float32)
        case = FakeCase("nvfp4_dequant", {"dtype": "f32", "n": 4, "k": 32},
                        {"weight": packed, "block_scale": bs, "global_scale": g}, {},
                        {"out": "F32"})
        y = w.nvfp4(case)["out"]
        q = f4.E2M1[f4.unpack(packed)]
        sg = (f4.E4M3[bs] * g[0]).astype(np.float32)
        np.testing.assert_array_equal(y, q * np.repeat(sg, 16, axis=1))


class HelperTest(unittest.TestCase):
    def test_bf16_conversion_rne_and_nan(self):
        x = np.array([1.0, 1.00390625, 1.01171875, -0.0, np.inf, np.nan], dtype=np.float32)
        b = cw.f32_to_bf16_bits(x)
        self.assertEqual(list(b[:5]), [0x3F80, 0x3F80, 0x3F82, 0x8000, 0x7F80])
        self.assertTrue(np.isnan(cw.bf16_bits_to_f32(b[5:])).all())

    def test_poisoned_arrays_hold_the_poison_bits(self):
        # That POISON equals targets/src/poison.rs is checked on the Rust side (`cargo test -p
        # conform-targets`, poison::tests::python_helper_poison_table_matches); here: that
        # `poisoned` fills every element of every dtype with exactly those bits.
        widths = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
        for dtype, bits in cw.POISON.items():
            p = cw.poisoned((2, 3), dtype)
            raw = p.view(widths[p.dtype.itemsize])
            self.assertEqual(raw.shape, (2, 3), dtype)
            self.assertTrue((raw == bits).all(), dtype)
            if dtype in ("F16", "F32", "F64"):
                self.assertTrue(np.isnan(p).all(), dtype)

if __name__ == "__main__":
    unittest.main()

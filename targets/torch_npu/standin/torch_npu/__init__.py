"""conform CPU stand-in for the torch_npu calls the conform worker makes (tests only; see
../README.md), written from their documented signatures and semantics:

- npu_fused_infer_attention_score(query, key, value, *, atten_mask, actual_seq_lengths,
  actual_seq_lengths_kv, block_table, num_heads, scale | scale_value, pre_tokens, next_tokens,
  input_layout, num_key_value_heads, sparse_mode, inner_precise, block_size, softmax_lse_flag)
  -> (attention_out, softmax_lse): the arguments are checked as the kernel documents them
  (layouts, the 2048x2048 compressed mask for sparse modes 2-4, block_table with block_size
  for paged KV, actual sequence lengths) and turned back into the attention they describe,
  computed in f32 with one rounding (the numpy target's straightforward attention);
- npu_dtype_cast(x, dtype, input_dtype=float4_e2m1fn_x2): two E2M1 codes per byte, low nibble
  first, decoded exactly;
- npu_mm_all_reduce_base(x1, x2, hcom, reduce_op="sum", bias=None, x3=None): each rank's
  x1 @ x2 in f32, summed over the ranks of the stand-in process group in rank order through a
  rendezvous directory, then bias [N] and x3 [M, N] added once, one rounding to the input
  dtype.
"""
import importlib.util
import os
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _guard  # noqa: E402

_guard.refuse_if_real("torch_npu")

import numpy as np  # noqa: E402
import torch  # noqa: E402

if not getattr(torch, "STANDIN", False):
    raise ImportError("the conform CPU stand-in for torch_npu runs only with the torch stand-in")

__version__ = "0.0+conform.standin"
STANDIN = True
float4_e2m1fn_x2 = torch.dtype("float4_e2m1fn_x2", np.uint8, 1)

_REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
_LAYOUTS = ("BSND", "BNSD", "BSH", "TND", "BNSD_BSND")
_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def _numpy_attention():
    """The numpy target's attention (f32 scores and softmax, one rounding)."""
    spec = importlib.util.spec_from_file_location(
        "conform_numpy_worker", os.path.join(_REPO, "targets", "numpy", "worker.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.attention


def _storage_name(t):
    return {"bfloat16": "BF16", "float16": "F16", "float32": "F32"}.get(t.dtype.name)


def _host(t, what):
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s must be a tensor, got %s" % (what, type(t).__name__))
    if t.device.type != "npu":
        raise RuntimeError("%s is on %s: the kernel takes NPU tensors" % (what, t.device.type))
    return t._a


def npu_fused_infer_attention_score(query, key, value, *, atten_mask=None, actual_seq_lengths=None,
                                    actual_seq_lengths_kv=None, block_table=None, num_heads=1,
                                    scale=None, scale_value=None, pre_tokens=2147483647,
                                    next_tokens=2147483647, input_layout="BSH",
                                    num_key_value_heads=0, sparse_mode=0, inner_precise=0,
                                    block_size=0, softmax_lse_flag=False, **unsupported):
    if unsupported:
        raise TypeError("stand-in: arguments not modelled: %s" % ", ".join(sorted(unsupported)))
    if scale is not None and scale_value is not None:
        raise TypeError("give scale or scale_value, not both")
    if input_layout not in _LAYOUTS:
        raise RuntimeError("input_layout %s is not supported" % input_layout)
    dt = _storage_name(query)
    if dt not in ("BF16", "F16") or key.dtype is not query.dtype or value.dtype is not query.dtype:
        raise RuntimeError("query, key and value must share one dtype of float16/bfloat16")
    q, k, v = (_host(t, n) for t, n in ((query, "query"), (key, "key"), (value, "value")))
    heads = int(num_heads)
    kv_heads = int(num_key_value_heads) or heads
    if heads % kv_heads:
        raise RuntimeError("num_heads must be a multiple of num_key_value_heads")
    p = {"input_layout": input_layout, "num_heads": heads, "num_key_value_heads": kv_heads,
         "sparse_mode": int(sparse_mode), "pre_tokens": int(pre_tokens),
         "next_tokens": int(next_tokens), "softmax_lse_flag": bool(softmax_lse_flag)}
    s = scale if scale is not None else scale_value
    if s is not None:
        p["scale"] = float(s)
    if actual_seq_lengths is not None:
        p["actual_seq_lengths"] = [int(x) for x in actual_seq_lengths]
    if actual_seq_lengths_kv is not None:
        p["actual_seq_lengths_kv"] = [int(x) for x in actual_seq_lengths_kv]
    # Sizes from the tensors, as the kernel reads them.
    if input_layout == "TND":
        if actual_seq_lengths is None:
            raise RuntimeError("TND needs actual_seq_lengths (cumulative)")
        p["batch"], p["head_dim"] = len(p["actual_seq_lengths"]), q.shape[2]
    elif input_layout == "BSH":
        p["batch"], p["q_seq"], p["head_dim"] = q.shape[0], q.shape[1], q.shape[2] // heads
    elif input_layout == "BSND":
        p["batch"], p["q_seq"], p["head_dim"] = q.shape[0], q.shape[1], q.shape[3]
    else:  # BNSD, BNSD_BSND
        p["batch"], p["q_seq"], p["head_dim"] = q.shape[0], q.shape[2], q.shape[3]
    inputs = {"query": q}
    op = "fa_prefill"
    if block_table is not None:
        op = "pa_decode"
        bs = int(block_size)
        if not (0 < bs <= 512 and bs % 16 == 0):
            raise RuntimeError("block_size %d: must be a multiple of 16 in 16..512" % bs)
        if actual_seq_lengths_kv is None:
            raise RuntimeError("paged attention needs actual_seq_lengths_kv")
        bt = _host(block_table, "block_table")
        if bt.dtype != np.int32 or bt.ndim != 2 or bt.shape[0] != p["batch"]:
            raise RuntimeError("block_table must be int32 [batch, max_blocks]")
        if k.ndim == 3:
            p["cache_layout"] = "BnBsH"
        elif k.ndim == 4:
            p["cache_layout"] = "BnNBsD"
        else:
            raise RuntimeError("key cache must be [blocks, block_size, H] or [blocks, N, block_size, D]")
        if k.shape[1 if k.ndim == 3 else 2] != bs:
            raise RuntimeError("the key cache's block dimension is not block_size %d" % bs)
        p["block_size"] = bs
        inputs.update(key_cache=k, value_cache=v, block_table=bt)
    else:
        if input_layout != "TND":
            p["kv_seq"] = k.shape[1] if input_layout in ("BSND", "BSH") else k.shape[2]
        inputs.update(key=k, value=v)
    if p["sparse_mode"] in (2, 3, 4):
        m = None if atten_mask is None else _host(atten_mask, "atten_mask")
        if m is None or m.shape != (2048, 2048) or not np.array_equal(
                m.astype(bool), np.triu(np.ones((2048, 2048), bool), k=1)):
            raise RuntimeError("sparse_mode %d takes the 2048x2048 compressed causal mask"
                               % p["sparse_mode"])
    elif p["sparse_mode"] != 0:
        raise RuntimeError("sparse_mode %d is not supported" % p["sparse_mode"])
    elif atten_mask is not None:
        m = _host(atten_mask, "atten_mask")
        if m.ndim != 4 or m.shape[1] != 1:
            raise RuntimeError("atten_mask must be bool [B, 1, S, L]")
        p["atten_mask"] = True
        inputs["atten_mask"] = m[:, 0].astype(np.uint8)
    case = types.SimpleNamespace(op=op, params=p, inputs=inputs,
                                 input_dtypes={n: dt for n in ("query", "key", "value",
                                                               "key_cache", "value_cache")},
                                 note=lambda text: None)
    res = _numpy_attention()(case)
    out = torch.Tensor(res["attention_out"], query.dtype, "npu")
    lse = res.get("softmax_lse")
    lse = torch.Tensor(lse, torch.float32, "npu") if lse is not None else torch.Tensor(
        np.zeros(1, np.float32), torch.float32, "npu")
    return out, lse


def npu_dtype_cast(x, dtype, input_dtype=None):
    if input_dtype is not float4_e2m1fn_x2:
        raise RuntimeError("stand-in: only input_dtype=float4_e2m1fn_x2 is modelled")
    codes = _host(x, "input")
    if codes.dtype != np.uint8:
        raise RuntimeError("float4_e2m1fn_x2 input must be uint8 storage")
    pairs = np.stack([codes & 15, codes >> 4], -1).reshape(codes.shape[:-1] + (-1,))
    return torch.Tensor(_E2M1[pairs], torch.float32, "npu").to(dtype)


def npu_mm_all_reduce_base(x1, x2, hcom, reduce_op="sum", bias=None, x3=None, **unsupported):
    import torch.distributed as dist
    if unsupported:
        raise TypeError("stand-in: arguments not modelled: %s" % ", ".join(sorted(unsupported)))
    if reduce_op != "sum":
        raise RuntimeError("reduce_op %s: only sum is supported" % reduce_op)
    g = dist.group.WORLD
    if g.comm is None or hcom != g.comm:
        raise RuntimeError("hcom %r is not the process group's communicator" % hcom)
    if x1.dtype is not x2.dtype or _storage_name(x1) not in ("BF16", "F16"):
        raise RuntimeError("x1 and x2 must share one dtype of float16/bfloat16")
    a, b = x1.to(torch.float32)._a, x2.to(torch.float32)._a
    _host(x1, "x1"), _host(x2, "x2")
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise RuntimeError("x1 [M, K] and x2 [K, N] expected, got %s and %s" % (a.shape, b.shape))
    partial = a @ b
    total = _all_reduce(partial, g.rank, g.world, hcom)
    if bias is not None:
        total = total + bias.to(torch.float32)._a
    if x3 is not None:
        r = x3.to(torch.float32)._a
        if r.shape != total.shape:
            raise RuntimeError("x3 must be [M, N] %s, got %s" % (total.shape, r.shape))
        total = total + r
    return torch.Tensor(total.astype(np.float32), torch.float32, "npu").to(x1.dtype)


def _all_reduce(partial, rank, world, comm, timeout_s=300):
    """Sum over the ranks in rank order, through files in a directory named by the
    communicator (the ranks are processes of one host)."""
    d = os.path.join(tempfile.gettempdir(), comm)
    os.makedirs(d, exist_ok=True)
    tmp = os.path.join(d, "rank%d.tmp.npy" % rank)
    np.save(tmp, partial)
    os.replace(tmp, os.path.join(d, "rank%d.npy" % rank))
    deadline = time.monotonic() + timeout_s
    parts = []
    for r in range(world):
        path = os.path.join(d, "rank%d.npy" % r)
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise RuntimeError("all-reduce: rank %d never arrived" % r)
            time.sleep(0.005)
        parts.append(np.load(path))
    total = parts[0].copy()
    for p in parts[1:]:
        total += p
    # Each rank says it has read everything; the last one removes the directory.
    open(os.path.join(d, "done%d" % rank), "w").close()
    if all(os.path.exists(os.path.join(d, "done%d" % r)) for r in range(world)):
        for f in os.listdir(d):
            try:
                os.remove(os.path.join(d, f))
            except OSError:
                pass
        try:
            os.rmdir(d)
        except OSError:
            pass
    return total

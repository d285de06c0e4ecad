"""Argument building for torch_npu kernels, as plain functions (no torch, no NPU) so they are
tested anywhere (targets/python/tests/test_torch_npu_args.py).

Written from the documented signatures (summarised in docs/numerics.md, "The FIA call"), torch_npu 2.x / CANN
8.x: npu_fused_infer_attention_score(query, key, value, *, atten_mask, actual_seq_lengths,
actual_seq_lengths_kv, block_table, num_heads, scale, pre_tokens, next_tokens, input_layout,
num_key_value_heads, sparse_mode, inner_precise, block_size, softmax_lse_flag, ...) ->
(attention_out, softmax_lse); npu_mm_all_reduce_base(x1, x2, hcom, *, reduce_op, bias, ...).
"""

import math

import numpy as np

# Suite parameter -> FIA keyword (identical names by design; the suites use torch_npu's).
FIA_PARAMS = {
    "num_heads": "num_heads",
    "num_key_value_heads": "num_key_value_heads",
    "scale": "scale",  # `scale_value` on older releases: see SCALE_KEYWORDS
    "input_layout": "input_layout",
    "sparse_mode": "sparse_mode",
    "pre_tokens": "pre_tokens",
    "next_tokens": "next_tokens",
    "actual_seq_lengths": "actual_seq_lengths",
    "actual_seq_lengths_kv": "actual_seq_lengths_kv",
    "block_size": "block_size",
    "softmax_lse_flag": "softmax_lse_flag",
}
SCALE_KEYWORDS = ("scale", "scale_value")
I32_MAX = 2147483647
# The compressed mask of sparse modes 2-4: 2048 x 2048, 1 (True) = masked, upper triangle.
COMPRESSED_MASK = 2048
LAYOUTS = ("BSND", "BNSD", "BSH", "TND", "BNSD_BSND")
PA_QUERY_LAYOUTS = {"BnBsH": ("BSND", "BNSD", "BSH", "BNSD_BSND"),
                    "BnNBsD": ("BNSD", "BNSD_BSND")}


class ArgError(ValueError):
    """A case the kernel cannot express (the worker reports it `unsupported`)."""


def compressed_causal_mask():
    """The 2048x2048 mask sparse modes 2, 3 and 4 take: True above the diagonal."""
    return np.triu(np.ones((COMPRESSED_MASK, COMPRESSED_MASK), dtype=bool), k=1)


def fia_kwargs(op, params, scale_keyword="scale"):
    """Keyword arguments for npu_fused_infer_attention_score, except the tensors (query,
    key, value, atten_mask, block_table), from a case's parameters. Returns (kwargs, mask_kind)
    where mask_kind is None, "explicit" ([B,1,S,L] from the input) or "compressed"."""
    p = params
    layout = p.get("input_layout", "BSND")
    if layout not in LAYOUTS:
        raise ArgError("input_layout %s" % layout)
    heads = int(p["num_heads"])
    kv_heads = int(p.get("num_key_value_heads", 0) or 0) or heads
    if heads % kv_heads or heads // kv_heads > 64:
        raise ArgError("num_heads / num_key_value_heads must be an integer <= 64")
    d = int(p["head_dim"])
    scale = p.get("scale")
    scale = float(scale) if scale is not None else 1.0 / math.sqrt(d)
    sparse = int(p.get("sparse_mode", 0))
    if sparse not in (0, 2, 3, 4):
        raise ArgError("sparse_mode %d" % sparse)
    explicit = bool(p.get("atten_mask", False))
    if explicit and sparse != 0:
        raise ArgError("an explicit atten_mask with sparse_mode %d cannot be expressed" % sparse)
    kw = {
        "num_heads": heads,
        "num_key_value_heads": kv_heads,
        scale_keyword: scale,
        "input_layout": layout,
        "sparse_mode": sparse,
        "pre_tokens": int(p.get("pre_tokens") if p.get("pre_tokens") is not None else I32_MAX),
        "next_tokens": int(p.get("next_tokens") if p.get("next_tokens") is not None else I32_MAX),
        "softmax_lse_flag": bool(p.get("softmax_lse_flag", False)),
        # 0 = high precision; the decode kernel accepts 0 or 1.
        "inner_precise": 0,
    }
    if p.get("actual_seq_lengths") is not None:
        kw["actual_seq_lengths"] = [int(x) for x in p["actual_seq_lengths"]]
    if p.get("actual_seq_lengths_kv") is not None:
        kw["actual_seq_lengths_kv"] = [int(x) for x in p["actual_seq_lengths_kv"]]
    if op == "pa_decode":
        bs = int(p.get("block_size", 128))
        if not (0 < bs <= 512 and bs % 16 == 0):
            raise ArgError("block_size %d: must be a multiple of 16 in 16..512" % bs)
        cache_layout = p.get("cache_layout", "BnBsH")
        if layout not in PA_QUERY_LAYOUTS.get(cache_layout, ()):
            raise ArgError("cache_layout %s with input_layout %s" % (cache_layout, layout))
        if "actual_seq_lengths_kv" not in kw:
            raise ArgError("pa_decode needs actual_seq_lengths_kv")
        kw["block_size"] = bs
    elif layout == "TND":
        if "actual_seq_lengths" not in kw:
            raise ArgError("TND needs cumulative actual_seq_lengths")
        if len(kw["actual_seq_lengths"]) > 4096:
            raise ArgError("TND takes at most 4096 sequences")
    if sparse in (2, 3, 4):
        mask_kind = "compressed"
    elif explicit:
        mask_kind = "explicit"
    else:
        mask_kind = None
    return kw, mask_kind


def explicit_mask(mask_b_s_l):
    """The input mask U8 [B, S, L] (1 = masked) -> bool [B, 1, S, L] as FIA takes it."""
    m = np.asarray(mask_b_s_l)
    return (m != 0)[:, None, :, :]


def lse_from_kernel(lse, layout):
    """softmax_lse as the kernel returns it ((B,N,S,1) or (T,N,1), f32) -> the suite's shape
    (the same), checked."""
    lse = np.asarray(lse, dtype=np.float32)
    if layout == "TND":
        if lse.ndim != 3:
            raise ArgError("TND softmax_lse must be (T, N, 1), got %s" % (lse.shape,))
    elif lse.ndim != 4:
        raise ArgError("softmax_lse must be (B, N, S, 1), got %s" % (lse.shape,))
    return lse


# MC2: suite tensor names, and how the coordinating worker launches one process per rank.
MC2_TENSORS = {"x1": "x1", "x2": "x2", "bias": "bias", "x3": "x3", "out": "out"}


def mc2_launch_command(python, rank_script, world_size, inputs, outputs, master_port):
    """The torchrun command line for one MatmulAllReduce case (one process per rank)."""
    if world_size not in (1, 2, 4, 8):
        raise ArgError("world_size %d: MC2 runs on 1, 2, 4 or 8 cards" % world_size)
    return [python, "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node=%d" % world_size, "--master_port=%d" % master_port,
            rank_script, "--inputs", inputs, "--outputs", outputs]


def mc2_shard(x1, x2, rank):
    """Rank `rank`'s operands: x1 [R, M, K] and x2 [R, K, N] hold one shard per rank."""
    if x1.ndim != 3 or x2.ndim != 3 or x1.shape[0] != x2.shape[0]:
        raise ArgError("x1 must be [R, M, K] and x2 [R, K, N]")
    if x1.shape[2] != x2.shape[1]:
        raise ArgError("K of x1 (%d) and x2 (%d) differ" % (x1.shape[2], x2.shape[1]))
    return x1[rank], x2[rank]


# Device models (torch.npu.get_device_name) without FP4 (E2M1) conversion in hardware, and
# those without MC2 (fused matmul + all-reduce, npu_mm_all_reduce_base: Atlas A2/A3 only).
NO_FP4_DEVICES = ("Ascend910A", "Ascend910B", "Ascend910_93", "Ascend310P")
NO_MC2_DEVICES = ("Ascend910A", "Ascend310P")


def probe(torch_npu, device_name):
    """What this torch_npu build and device cannot run, found at the handshake: op -> the
    reason (ops that can run are absent). Pure (the module is a parameter), so it is tested
    without torch_npu. Every case of an op listed here is skipped with the reason."""
    version = getattr(torch_npu, "__version__", "?")
    reasons = {}
    if not hasattr(torch_npu, "npu_fused_infer_attention_score"):
        why = "torch_npu %s has no npu_fused_infer_attention_score" % version
        reasons["fa_prefill"] = why
        reasons["pa_decode"] = why
    if not (hasattr(torch_npu, "npu_dtype_cast") and hasattr(torch_npu, "float4_e2m1fn_x2")):
        reasons["mxfp4_dequant"] = ("torch_npu %s has no float4_e2m1fn_x2 dtype for npu_dtype_cast"
                                    % version)
    elif device_name.replace(" ", "").startswith(NO_FP4_DEVICES):
        reasons["mxfp4_dequant"] = "device %s has no FP4 (E2M1) conversion" % device_name
    if not hasattr(torch_npu, "npu_mm_all_reduce_base"):
        reasons["mc2_matmul_allreduce"] = "torch_npu %s has no npu_mm_all_reduce_base" % version
    elif device_name.replace(" ", "").startswith(NO_MC2_DEVICES):
        reasons["mc2_matmul_allreduce"] = ("device %s does not run MC2 (npu_mm_all_reduce_base "
                                           "needs an Atlas A2/A3 device)" % device_name)
    return reasons

"""Argument building for torch_npu kernels, as plain functions (no torch, no NPU) so they are
tested anywhere (targets/python/tests/test_torch_npu_args.py).

Written from the documented signatures (summarised in docs/numerics.md, "The FIA call"), torch_npu 2.x / CANN
8.x: npu_fused_infer_attention_score(query, key, value, *, atten_mask, actual_seq_lengths,
actual_seq_lengths_kv, block_table, num_heads, scale, pre_tokens, next_tokens, input_layout,
num_key_value_heads, sparse_mode, inner_precise, block_size, softmax_lse_flag, ...) ->
(attention_out, softmax_lse); npu_mm_all_reduce_base(x1, x2, hcom, *, reduce_op, bias, ...).
"""

import math
import re

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
    """A case the kernel cannot express (the worker reports it `unsupported`). A subclass names
    the page whose constraint the case breaks; its message ends with it."""

    SOURCE = None

    def __str__(self):
        msg = super().__str__()
        return "%s (%s)" % (msg, self.SOURCE) if self.SOURCE else msg


# The pages the constraints come from (hicann/ops-transformer and hicann/ops-nn `docs/`, the
# torch_npu API pages; docs/ascend.md, "The torch_npu worker", lists them with their commits).
class FiaRule(ArgError):
    SOURCE = "aclnnFusedInferAttentionScoreV4 page"


class MlaRule(ArgError):
    SOURCE = "aclnnFusedInferAttentionScoreV3 page, queryRope/keyRope with a query D of 512"


class WqbmmRule(ArgError):
    SOURCE = "aclnnWeightQuantBatchMatmulV2 page, per-group antiquant"


class Mc2Rule(ArgError):
    SOURCE = "aclnnMatmulAllReduce page"


class QmmRule(ArgError):
    SOURCE = "aclnnQuantMatmulV4 page, the Atlas A2/A3 table of dtype combinations"


def compressed_causal_mask():
    """The 2048x2048 mask sparse modes 2, 3 and 4 take: True above the diagonal."""
    return np.triu(np.ones((COMPRESSED_MASK, COMPRESSED_MASK), dtype=bool), k=1)


def fia_kwargs(op, params, scale_keyword="scale"):
    """Keyword arguments for npu_fused_infer_attention_score, except the tensors (query,
    key, value, atten_mask, block_table), from a case's parameters. Returns (kwargs, mask_kind)
    where mask_kind is None, "explicit" ([B,1,S,L] from the input) or "compressed".

    Combinations the aclnnFusedInferAttentionScoreV4 page rejects raise ArgError with the
    documented reason (the worker reports them `unsupported`, a skip), never reach the kernel."""
    p = params
    layout = p.get("input_layout", "BSND")
    if layout not in LAYOUTS:
        raise ArgError("input_layout %s" % layout)
    heads = int(p["num_heads"])
    kv_heads = int(p.get("num_key_value_heads", 0) or 0) or heads
    if heads > 256:
        raise FiaRule("num_heads %d: FIA takes at most 256 heads" % heads)
    if heads % kv_heads or heads // kv_heads > 64:
        raise FiaRule("num_heads / num_key_value_heads must be an integer <= 64")
    d = int(p["head_dim"])
    if d > 512:
        raise FiaRule("head_dim %d: FIA takes at most 512" % d)
    scale = p.get("scale")
    scale = float(scale) if scale is not None else 1.0 / math.sqrt(d)
    sparse = int(p.get("sparse_mode", 0))
    if sparse not in (0, 1, 2, 3, 4):
        raise FiaRule("sparse_mode %d: 0 to 4" % sparse)
    if sparse == 1:
        raise ArgError("sparse_mode 1 (allMask): the worker maps 0, 2, 3 and 4")
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
    }
    if p.get("actual_seq_lengths") is not None:
        kw["actual_seq_lengths"] = [int(x) for x in p["actual_seq_lengths"]]
    if p.get("actual_seq_lengths_kv") is not None:
        kw["actual_seq_lengths_kv"] = [int(x) for x in p["actual_seq_lengths_kv"]]
    if op == "pa_decode":
        bs = int(p.get("block_size", 128))
        if not (0 < bs <= 512 and bs % 16 == 0):
            raise FiaRule("block_size %d: must be a multiple of 16 in 16..512" % bs)
        cache_layout = p.get("cache_layout", "BnBsH")
        if cache_layout not in PA_QUERY_LAYOUTS:
            raise ArgError("cache_layout %s" % cache_layout)
        if "actual_seq_lengths_kv" not in kw:
            raise FiaRule("PagedAttention needs actual_seq_lengths_kv")
        if layout not in PA_QUERY_LAYOUTS[cache_layout]:
            # With one query row, [B, 1, N, D] (BSND) or [B, 1, N*D] (BSH) holds the same
            # bytes as [B, N, 1, D]: the query goes in as BNSD, the only query layout (with
            # TND) the page allows with a (blocknum, KV_N, blocksize, D) cache.
            if layout in ("BSND", "BSH") and cache_layout == "BnNBsD":
                kw["input_layout"] = "BNSD"
            else:
                raise FiaRule("cache_layout %s with input_layout %s" % (cache_layout, layout))
        kw["block_size"] = bs
    elif layout == "TND":
        tnd_check(p, heads, kv_heads, d, sparse, explicit)
        if len(kw.get("actual_seq_lengths", ())) > 4096:
            raise FiaRule("TND takes at most 4096 sequences")
    kw["inner_precise"] = inner_precise_for(op, p)
    if sparse in (2, 3, 4):
        mask_kind = "compressed"
    elif explicit:
        mask_kind = "explicit"
    else:
        mask_kind = None
    return kw, mask_kind


C8_FIA_PARAMS = ("dtype", "input_layout", "batch", "num_heads", "num_key_value_heads",
                 "head_dim", "scale", "actual_seq_lengths_kv", "block_size", "cache_layout")


def c8_kwargs(params, scale_keyword="scale"):
    """FIA keyword arguments (except the tensors) for a pa_decode_int8 case: the PagedAttention
    decode arguments of fia_kwargs plus key_antiquant_mode / value_antiquant_mode. The page's
    Q_S = 1 antiquant rules are checked first (ArgError, a skip): modes 0 or 1, equal or key 0
    with value 1 (INT8 then needs an f16 query), an INT8 cache's block_size a multiple of 32."""
    p = params
    km = int(p.get("key_antiquant_mode", 0))
    vm = int(p.get("value_antiquant_mode", 0))
    if km not in (0, 1) or vm not in (0, 1):
        raise ArgError("key/value_antiquant_mode %d/%d: the worker maps 0 (per-channel) and 1 "
                       "(per-token)" % (km, vm))
    if km != vm and not (km == 0 and vm == 1):
        raise FiaRule("key_antiquant_mode %d with value_antiquant_mode %d: the modes must "
                       "match, except key 0 with value 1" % (km, vm))
    if (km, vm) == (0, 1) and p.get("dtype") != "f16":
        raise FiaRule("key per-channel with value per-token over INT8 needs an f16 query")
    bs = int(p.get("block_size", 128))
    if bs % 32:
        raise FiaRule("block_size %d: an INT8 cache needs a multiple of 32" % bs)
    kw, _ = fia_kwargs("pa_decode", {k: p[k] for k in C8_FIA_PARAMS if k in p}, scale_keyword)
    kw["key_antiquant_mode"] = km
    kw["value_antiquant_mode"] = vm
    return kw


MLA_HEADS = (1, 2, 4, 8, 16, 32, 64, 128)
MLA_BLOCK_SIZES = (16, 128)
MLA_WIDTHS = {"query": 512, "query_rope": 64}


def mla_kwargs(params, scale_keyword="scale"):
    """FIA keyword arguments (except the tensors) for an mla_decode case, as vLLM-Ascend's MLA
    decode passes them: num_heads, num_key_value_heads 1, input_layout, the caller's scale,
    sparse_mode 0 (one query row, no mask), block_size, actual_seq_lengths_kv and
    softmax_lse_flag; the caller adds query_rope, key_rope and block_table. Returns (kwargs,
    cache_form): the latent caches go in as (blocknum, KV_N = 1, blocksize, D) with a BNSD
    query and as (blocknum, blocksize, H = D) with a BSND one (the same bytes, KV_N being 1;
    the page takes the first form with BNSD/TND queries only).

    The MLA rules of the aclnnFusedInferAttentionScoreV3 page (query D 512) are checked first
    (ArgError, a skip): N in 1, 2, 4, ..., 128, one KV head, block_size 16 or 128, f16/bf16,
    decode (one query row, sparse_mode 0, no mask)."""
    p = params
    layout = p.get("input_layout", "BNSD")
    if layout not in ("BNSD", "BSND"):
        raise ArgError("input_layout %s: the worker maps BNSD and BSND" % layout)
    heads = int(p["num_heads"])
    if heads not in MLA_HEADS:
        raise MlaRule("num_heads %d: MLA takes 1, 2, 4, 8, 16, 32, 64 or 128 query heads" % heads)
    if int(p.get("num_key_value_heads", 1) or 1) != 1:
        raise MlaRule("MLA takes one KV head (the latent cache), not %s"
                       % p["num_key_value_heads"])
    bs = int(p["block_size"])
    if bs not in MLA_BLOCK_SIZES:
        raise MlaRule("block_size %d: MLA takes 16 or 128" % bs)
    if p.get("dtype") not in ("bf16", "f16"):
        raise MlaRule("dtype %s: MLA takes f16 or bf16" % p.get("dtype"))
    if int(p.get("q_seq", 1) or 1) != 1:
        raise ArgError("q_seq %s: the worker maps the decode step (one query row) only"
                       % p["q_seq"])
    if p.get("actual_seq_lengths_kv") is None:
        raise MlaRule("MLA (PagedAttention) needs actual_seq_lengths_kv")
    if p.get("scale") is None:
        raise ArgError("MLA needs the caller's scale (no default from the latent width)")
    kw = {
        "num_heads": heads,
        "num_key_value_heads": 1,
        scale_keyword: float(p["scale"]),
        "input_layout": layout,
        "sparse_mode": 0,
        "block_size": bs,
        "actual_seq_lengths_kv": [int(x) for x in p["actual_seq_lengths_kv"]],
        "softmax_lse_flag": bool(p.get("softmax_lse_flag", False)),
    }
    return kw, ("BnNBsD" if layout == "BNSD" else "BnBsH")


def c8_rows(params, num_rows):
    """(batch, position) of each new row of a pa_decode_int8 case: row r belongs to sequence
    r // new_tokens, at the last new_tokens positions of its context."""
    new = int(params.get("new_tokens", 1))
    lk = [int(x) for x in params["actual_seq_lengths_kv"]]
    b = np.arange(num_rows) // new
    pos = np.array([lk[r // new] - new + r % new for r in range(num_rows)], dtype=np.int64)
    return b, pos


def tnd_check(p, heads, kv_heads, d, sparse, explicit):
    """The TND limits of aclnnFusedInferAttentionScoreV4 ("TND, TND_NTD, NTD_TND: combined
    limits on query, key, value", Atlas A2/A3): actual lengths given (<= 4096 each); sparse
    mode 0 without a mask or 3 with one; head_dim 512 only with query_rope/key_rope (MLA),
    PagedAttention and one KV head; otherwise BF16 only and head_dim 128 or 192 (192 neither
    with GQA nor with PagedAttention); with sparse mode 3 every batch's query length below its
    KV length. Raises ArgError with the first rule the case breaks."""
    if p.get("actual_seq_lengths") is None or p.get("actual_seq_lengths_kv") is None:
        raise FiaRule("TND needs cumulative actual_seq_lengths and actual_seq_lengths_kv")
    if explicit or sparse not in (0, 3):
        raise FiaRule("TND takes sparse_mode 0 (no mask) or 3 (causal), not %s"
                       % ("an explicit mask" if explicit else sparse))
    if d == 512:
        raise FiaRule("TND with head_dim 512 needs query_rope/key_rope (MLA) and "
                       "PagedAttention, which the suites do not state")
    if d not in (128, 192):
        raise FiaRule("TND needs head_dim 128 or 192 (512 only with query_rope/key_rope), "
                       "not %d" % d)
    if d == 192 and heads != kv_heads:
        raise FiaRule("TND with head_dim 192 does not support GQA")
    if p.get("dtype", "bf16") != "bf16":
        raise FiaRule("TND with head_dim %d takes BF16 only, not %s" % (d, p.get("dtype")))
    if sparse == 3:
        lq = _lengths(p["actual_seq_lengths"])
        lk = _lengths(p["actual_seq_lengths_kv"])
        if any(a >= b for a, b in zip(lq, lk)):
            raise FiaRule("TND with sparse_mode 3 needs each batch's query length below its "
                           "KV length")


def _lengths(cumulative):
    ends = [int(x) for x in cumulative]
    return [e - s for s, e in zip([0] + ends[:-1], ends)]


def batch_lengths(p):
    """(query length, KV length) per batch, as the kernel reads them."""
    if p.get("input_layout", "BSND") == "TND":
        return list(zip(_lengths(p["actual_seq_lengths"]), _lengths(p["actual_seq_lengths_kv"])))
    b = int(p.get("batch", 1))
    sq = int(p.get("q_seq", 1))
    skv = int(p.get("kv_seq", 0) or 0)
    lq = p.get("actual_seq_lengths") or [sq] * b
    lk = p.get("actual_seq_lengths_kv") or [skv] * b
    return [(min(int(a), sq), int(c)) for a, c in zip(lq, lk)]


def may_have_empty_rows(p):
    """Whether some query row the kernel computes can see no key: then its output needs the
    row-invalid correction."""
    if p.get("atten_mask"):
        return True  # a user mask: the page advises the correction
    sparse = int(p.get("sparse_mode", 0))
    pre = int(p.get("pre_tokens") if p.get("pre_tokens") is not None else I32_MAX)
    nxt = int(p.get("next_tokens") if p.get("next_tokens") is not None else I32_MAX)
    for lq, lk in batch_lengths(p):
        if lk == 0 and lq > 0:
            return True
        shift = lk - lq
        for i in range(lq):
            lo, hi = 0, lk - 1
            if sparse == 2:
                hi = min(hi, i)
            elif sparse == 3:
                hi = min(hi, i + shift)
            elif sparse == 4:
                lo = max(lo, i + shift - pre)
                hi = min(hi, i + shift + nxt)
            if lo > hi:
                return True
    return False


def inner_precise_for(op, p):
    """inner_precise by the aclnnFusedInferAttentionScoreV4 page: 0 = high precision without
    the row-invalid correction, 2 = high precision with it. The decode path (one query row)
    accepts only 0 and 1. In prefill, a row that sees no key (fully masked) is only right with
    the correction (the page: with 0/1 "precision may be lost", configure 2 or 3), and a user
    mask is advised to take it; otherwise 0 (the correction costs time)."""
    if op == "pa_decode" or (p.get("input_layout") != "TND" and int(p.get("q_seq", 1)) == 1):
        return 0
    if may_have_empty_rows(p):
        return 2  # row-invalid correction
    return 0


def padded_rows(p):
    """Query rows the kernel is not documented to write: past actual_seq_lengths[b] in a
    padded (non-TND) layout. [(batch, first padded row)]."""
    if p.get("input_layout", "BSND") == "TND" or p.get("actual_seq_lengths") is None:
        return []
    sq = int(p.get("q_seq", 1))
    return [(b, int(n)) for b, n in enumerate(p["actual_seq_lengths"]) if int(n) < sq]


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


def mc2_launch_command(python, rank_script, world_size, inputs, outputs, master_port,
                       any_world=False):
    """The torchrun command line for one MatmulAllReduce case (one process per rank); with
    `any_world` (the MoE dispatch/combine), any rank count."""
    if not any_world and world_size not in (1, 2, 4, 8):
        raise Mc2Rule("world_size %d: MC2 runs on 1, 2, 4 or 8 cards" % world_size)
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


# Product families by SoC name as torch.npu.get_device_name returns it (the SocVersion list of
# Ascend/pytorch, torch_npu/csrc/core/npu/NpuVariables.h). Names are matched whole: prefix
# matching let first-generation parts through ("Ascend910B" is a first-generation Atlas
# training part, "Ascend910B4" an Atlas A2 one; "Ascend910ProB" is first-generation too).
FAMILIES = (
    ("Atlas A2", re.compile(r"^Ascend910B[1-4](C|-1)?$")),
    ("Atlas A3", re.compile(r"^Ascend910_93\d\d$")),
    ("Ascend950", re.compile(r"^(Ascend950(PR|DT)?(_\w+)?|Ascend910_95\w*)$")),
    ("Atlas training (first generation)", re.compile(r"^Ascend910(A|B|ProA|ProB|PremiumA)$")),
    ("Atlas inference (310P)", re.compile(r"^Ascend310P\d$")),
    ("Atlas 200I/500 A2 (310B)", re.compile(r"^Ascend310B\d$")),
)
# Where each kernel runs, from its page's product table:
# - FIA (aclnnFusedInferAttentionScoreV4): Atlas A2, Atlas A3;
# - MC2 (aclnnMatmulAllReduce / V2): Atlas A2 only (A3 marked unsupported);
# - the FP4 cast (npu_dtype_cast from float4_e2m1fn_x2, torch_npu 26.0 / CANN 9.0 on): its
#   op-plugin test runs on Ascend950 only;
# - aclnnWeightQuantBatchMatmulV2 per-group: Atlas A2, A3 and Ascend950 (310P per-channel only);
# - the cache writes (ATB ReshapeAndCache, aclnnScatterNdUpdate with BF16): Atlas A2, A3;
# - npu_dynamic_quant (aclnnDynamicQuant): Atlas A2, A3 (torch_npu 7.0.0 page);
# - npu_quant_matmul with bf16 output and per-token scales (aclnnQuantMatmulV4): Atlas A2, A3
#   (the page's Atlas inference series takes int8 / f16 outputs without per-token scales only).
PRODUCTS = {
    "fia": ("Atlas A2", "Atlas A3"),
    "mc2": ("Atlas A2",),
    "fp4_cast": ("Ascend950",),
    "weight_quant": ("Atlas A2", "Atlas A3", "Ascend950"),
    "cache_write": ("Atlas A2", "Atlas A3"),
    "dynamic_quant": ("Atlas A2", "Atlas A3"),
    "quant_matmul": ("Atlas A2", "Atlas A3"),
}


def product_family(device_name):
    """The product family of a SoC name, or None when it is in no documented list."""
    name = (device_name or "").strip()
    for fam, rx in FAMILIES:
        if rx.match(name):
            return fam
    return None


def _device_reason(kernel, what, device_name):
    fam = product_family(device_name)
    if fam in PRODUCTS[kernel]:
        return None
    return "device %s (%s) does not run %s: documented for %s only" % (
        device_name, fam or "not in any documented product list", what,
        ", ".join(PRODUCTS[kernel]))


def probe(torch_npu, device_name, atb=None):
    """What this torch_npu build and device cannot run, found at the handshake: op -> the
    reason (ops that can run are absent). Pure (the module is a parameter), so it is tested
    without torch_npu. Every case of an op listed here is skipped with the reason. `atb` is why
    NNAL's ATB does not load (atb_unavailable), or None: every mla_decode case writes its
    caches through ATB, so the op is then unavailable (the BnBsH cases of paged_kv and
    pa_decode_int8 are skipped one by one: needs_atb)."""
    version = getattr(torch_npu, "__version__", "?")
    reasons = {}
    if not hasattr(torch_npu, "npu_fused_infer_attention_score"):
        why = "torch_npu %s has no npu_fused_infer_attention_score" % version
    else:
        why = _device_reason("fia", "npu_fused_infer_attention_score", device_name)
    if why:
        reasons["fa_prefill"] = reasons["pa_decode"] = reasons["pa_decode_int8"] = why
    elif not (hasattr(torch_npu, "_npu_reshape_and_cache")
              and hasattr(torch_npu, "npu_scatter_nd_update_")):
        reasons["pa_decode_int8"] = ("torch_npu %s lacks _npu_reshape_and_cache or "
                                     "npu_scatter_nd_update_ (the INT8 cache writes)" % version)
    if why:
        reasons["mla_decode"] = why
    elif not hasattr(torch_npu, "_npu_reshape_and_cache"):
        reasons["mla_decode"] = ("torch_npu %s has no _npu_reshape_and_cache (the latent cache "
                                 "write)" % version)
    elif atb:
        reasons["mla_decode"] = atb
    if not (hasattr(torch_npu, "npu_dtype_cast") and hasattr(torch_npu, "float4_e2m1fn_x2")):
        reasons["mxfp4_dequant"] = ("torch_npu %s has no float4_e2m1fn_x2 dtype for npu_dtype_cast"
                                    " (the FP4 cast exists from torch_npu 26.0 / CANN 9.0)"
                                    % version)
    else:
        why = _device_reason("fp4_cast", "the FP4 (E2M1) npu_dtype_cast", device_name)
        if why:
            reasons["mxfp4_dequant"] = why
    if not hasattr(torch_npu, "npu_mm_all_reduce_base"):
        reasons["mc2_matmul_allreduce"] = "torch_npu %s has no npu_mm_all_reduce_base" % version
    else:
        why = _device_reason("mc2", "MC2 (npu_mm_all_reduce_base)", device_name)
        if why:
            reasons["mc2_matmul_allreduce"] = why
    if not hasattr(torch_npu, "npu_weight_quant_batchmatmul"):
        reasons["w4a16_matmul"] = "torch_npu %s has no npu_weight_quant_batchmatmul" % version
    else:
        why = _device_reason("weight_quant", "per-group npu_weight_quant_batchmatmul",
                             device_name)
        if why:
            reasons["w4a16_matmul"] = why
    if not (hasattr(torch_npu, "_npu_reshape_and_cache")
            or hasattr(torch_npu, "npu_scatter_nd_update_")):
        reasons["paged_kv"] = ("torch_npu %s has neither _npu_reshape_and_cache nor "
                               "npu_scatter_nd_update_" % version)
    else:
        why = _device_reason("cache_write", "the BF16 cache writes", device_name)
        if why:
            reasons["paged_kv"] = why
    if not hasattr(torch_npu, "npu_dynamic_quant"):
        reasons["dynamic_quant"] = "torch_npu %s has no npu_dynamic_quant" % version
    else:
        why = _device_reason("dynamic_quant", "npu_dynamic_quant", device_name)
        if why:
            reasons["dynamic_quant"] = why
    if not (hasattr(torch_npu, "npu_quant_matmul") and hasattr(torch_npu, "npu_trans_quant_param")):
        reasons["quant_matmul"] = ("torch_npu %s lacks npu_quant_matmul or npu_trans_quant_param"
                                   % version)
    else:
        why = _device_reason("quant_matmul", "npu_quant_matmul", device_name)
        if why:
            reasons["quant_matmul"] = why
    return reasons


# --------------------------------------------------------------------------- W8A8

# The aclnnQuantMatmulV4 page's combinations for INT8 x1 and x2 on Atlas A2 / A3 (hicann/ops-nn
# matmul/quant_batch_matmul_v3/docs/aclnnQuantMatmulV4.md, "约束说明"), as (scale, offset,
# bias, pertoken scale, output) dtype sets; None is an absent tensor. The INT32 output is not
# mapped by the worker.
QMM_TABLE = (
    ({"INT64"}, {None}, {None, "INT32"}, {None}, "F16"),
    ({"INT64"}, {None, "FLOAT32"}, {None, "INT32"}, {None}, "I8"),
    ({"FLOAT32", "BFLOAT16"}, {None}, {None, "INT32", "BFLOAT16", "FLOAT32"}, {None, "FLOAT32"},
     "BF16"),
    ({"FLOAT32"}, {None}, {None, "INT32", "FLOAT16", "FLOAT32"}, {"FLOAT32"}, "F16"),
)
QMM_DTYPES = {"packed": "INT64", "f32": "FLOAT32", "bf16": "BFLOAT16", "f16": "FLOAT16",
              "i32": "INT32", "none": None}
QMM_OUT = {"bf16": "BF16", "f16": "F16", "int8": "I8"}


def quant_matmul_check(params):
    """The dtype combination npu_quant_matmul is called with for a quant_matmul case, checked
    against the page's table (QmmRule, a skip, when it is not there). The packed scale is the
    INT64 of npu_trans_quant_param."""
    p = params
    combo = (QMM_DTYPES.get(p.get("scale", "f32"), p.get("scale")),
             "FLOAT32" if p.get("offset") else None,
             QMM_DTYPES.get(p.get("bias", "none"), p.get("bias")),
             "FLOAT32" if p.get("pertoken") else None,
             QMM_OUT.get(p.get("out", "bf16"), p.get("out")))
    for row in QMM_TABLE:
        if all(v in allowed for v, allowed in zip(combo[:4], row[:4])) and combo[4] == row[4]:
            return
    raise QmmRule("scale %s, offset %s, bias %s, pertoken_scale %s with a %s output is not one "
                  "of the combinations" % tuple(x or "absent" for x in combo))


# --------------------------------------------------------------------------- ATB

ATB_USERS = ("_npu_reshape_and_cache (op-plugin's ATB ReshapeAndCache: every mla_decode case, "
             "the BnBsH cache writes of paged_kv and pa_decode_int8)")


def atb_unavailable(error, cann_release=None, arch=None):
    """The skip reason for the ATB-based cases when loading ATB raised `error` (torch_npu's
    OSError asking for NNAL, chained to the loader's error): what failed and what to install."""
    why = "%s: %s" % (type(error).__name__, error)
    cause = error.__cause__
    if cause is not None:
        why += " (from %s: %s)" % (type(cause).__name__, cause)
    return ("NNAL's ATB does not load, and %s needs it: %s. Install NNAL of the same CANN "
            "release (Ascend-cann-nnal_%s_linux-%s.run) and source nnal/atb/set_env.sh before "
            "conform starts (ci/atlas/setup-torch-npu.sh finds, sources and checks it)"
            % (ATB_USERS, why, cann_release or "<CANN release>", arch or "<arch>"))


def needs_atb(op, params):
    """Whether a case writes its cache through ATB (_npu_reshape_and_cache): every mla_decode
    case; paged_kv in the BnBsH layout with f16/bf16 (cache_write_plan); pa_decode_int8 with
    the BnBsH cache."""
    if op == "mla_decode":
        return True
    if op == "paged_kv":
        return params.get("layout") == "BnBsH" and params.get("dtype", "bf16") in ("bf16", "f16")
    if op == "pa_decode_int8":
        return params.get("cache_layout", "BnBsH") == "BnBsH"
    return False


def toolkit_versions(environ, read_text):
    """The CANN release and NNAL ATB version for the handshake's libraries: what
    ci/atlas/setup-torch-npu.sh recorded (CONFORM_CANN_RELEASE, CONFORM_CANN_BUILD,
    CONFORM_ATB_VERSION), else what the environment a set_env.sh left says: the release
    directory ASCEND_TOOLKIT_HOME / ASCEND_HOME_PATH points to (ascend-toolkit/8.0.0,
    cann-8.5.0) and ATB's version.info two levels above ATB_HOME_PATH ("Ascend-cann-atb :
    8.2.RC2"). `read_text(path)` returns a file's text or None."""
    import os
    out = {}
    cann = environ.get("CONFORM_CANN_RELEASE")
    if not cann:
        home = environ.get("ASCEND_TOOLKIT_HOME") or environ.get("ASCEND_HOME_PATH")
        if home:
            name = os.path.basename(os.path.realpath(home))
            name = name[len("cann-"):] if name.startswith("cann-") else name
            if RELEASE.match(name):
                cann = name
    if cann:
        build = environ.get("CONFORM_CANN_BUILD")
        out["CANN"] = cann if not build or build == cann else "%s (build %s)" % (cann, build)
    atb = environ.get("CONFORM_ATB_VERSION")
    if not atb and environ.get("ATB_HOME_PATH"):
        text = read_text(os.path.join(environ["ATB_HOME_PATH"], "..", "..", "version.info"))
        m = re.search(r"^\s*Ascend-cann-atb\s*:\s*(\S+)", text or "", re.M)
        atb = m.group(1) if m else None
    if atb:
        out["ATB"] = atb
    return out


RELEASE = re.compile(r"^\d+\.\d+\.(RC\d+|\d+)([.-][A-Za-z][0-9A-Za-z.]*)?$")


# --------------------------------------------------------------------------- W4A16

def e2m1_as_int8(codes, packing="low_first"):
    """FP4 E2M1 codes, two per byte ([n, k/2] U8), -> 2 x their value as INT8 [n, k]: exact
    (the E2M1 values times 2 are the integers 0, 1, 2, 3, 4, 6, 8, 12 with a sign), so an INT8
    weight with half the scale dequantises to exactly the FP4 weight."""
    c = np.asarray(codes, dtype=np.uint8)
    lo, hi = c & 15, c >> 4
    first, second = (lo, hi) if packing == "low_first" else (hi, lo)
    e = np.stack([first, second], -1).reshape(c.shape[:-1] + (-1,))
    mag = np.array([0, 1, 2, 3, 4, 6, 8, 12], dtype=np.int8)[e & 7]
    return np.where(e >= 8, -mag, mag).astype(np.int8)


def e8m0_half_as_f32(scale):
    """E8M0 scale bytes -> 2^(e - 127) / 2 in f32 (exact, including 2^-128 as a subnormal);
    the NaN code 0xFF stays NaN."""
    e = np.asarray(scale, dtype=np.uint8).astype(np.int32)
    v = np.ldexp(np.float32(1.0), e - 128).astype(np.float32)
    return np.where(e == 255, np.float32(np.nan), v).astype(np.float32)


def w4a16_args(params, k):
    """Checks a w4a16 case against aclnnWeightQuantBatchMatmulV2's per-group rules; returns the
    group size. MXFP4 (E8M0 per 32) maps onto per-group INT8 with a BF16 scale; NVFP4 (E4M3
    per 16 and a global scale) does not (group 16 is below the documented minimum of 32)."""
    fmt = params.get("format", "mxfp4")
    if fmt != "mxfp4":
        raise WqbmmRule("format %s: npu_weight_quant_batchmatmul's per-group mode needs "
                       "antiquant_group_size a multiple of 32 in [32, k-1], and NVFP4 groups "
                       "are 16 with an E4M3 scale" % fmt)
    g = int(params.get("group_size", 32))
    if g % 32 or not 32 <= g <= k - 1:
        raise WqbmmRule("antiquant_group_size %d: must be a multiple of 32 in [32, k-1] (k = %d)"
                       % (g, k))
    if params.get("element", "e2m1") != "e2m1":
        raise ArgError("element %s: only E2M1 re-encodes exactly as INT8" % params["element"])
    if params.get("dtype", "bf16") != "bf16":
        raise WqbmmRule("output dtype %s: the kernel's y has x's dtype (BF16)" % params["dtype"])
    if not (1 <= k <= 65535):
        raise WqbmmRule("k %d outside [1, 65535]" % k)
    return g


# --------------------------------------------------------------------------- paged KV

def cache_write_plan(layout, dtype, slots, n, d, bs, elem_bytes):
    """How the worker writes a paged_kv case: ("reshape_and_cache", None) for BnBsH in
    F16/BF16 (the vLLM-Ascend path, ATB ReshapeAndCache), else ("scatter_nd", (key_idx,
    value_idx)) with the npu_scatter_nd_update_ index tensors for the layout. `slots` are the
    valid (non-padding) slots only."""
    slots = np.asarray(slots, dtype=np.int64)
    blk, off = slots // bs, slots % bs
    t = len(slots)
    if layout == "BnBsH" and dtype in ("bf16", "f16"):
        return "reshape_and_cache", None
    if layout == "BnBsH":
        idx = np.stack([blk, off], -1)  # input [blocks, bs, H], updates [t, H]
        return "scatter_nd", (idx, idx)
    heads = np.arange(n)
    if layout == "BnNBsD":  # input [blocks, N, bs, D], updates [t, N, D]
        idx = np.stack(np.broadcast_arrays(blk[:, None], heads[None, :], off[:, None]), -1)
        return "scatter_nd", (idx, idx)
    if layout == "vllm":
        x = 16 // elem_bytes
        # key [blocks, N, D/x, bs, x]: updates [t, N, D/x, x]
        dx = np.arange(d // x)
        kidx = np.stack(np.broadcast_arrays(blk[:, None, None], heads[None, :, None],
                                            dx[None, None, :], off[:, None, None]), -1)
        # value [blocks, N, D, bs]: updates [t, N, D]
        dd = np.arange(d)
        vidx = np.stack(np.broadcast_arrays(blk[:, None, None], heads[None, :, None],
                                            dd[None, None, :], off[:, None, None]), -1)
        return "scatter_nd", (kidx.reshape(t, n, d // x, 4), vidx.reshape(t, n, d, 4))
    raise ArgError("layout %s" % layout)


# --------------------------------------------------------------------------- MC2 timing

def mc2_iteration_times(per_rank):
    """Per-iteration device times of the ranks ([rank][iteration] microseconds) -> one time per
    iteration: the slowest rank's (the collective ends when its last rank does)."""
    if not per_rank or len({len(t) for t in per_rank}) != 1:
        raise ArgError("the ranks timed different numbers of iterations: %s"
                       % [len(t) for t in per_rank])
    return [max(float(t[i]) for t in per_rank) for i in range(len(per_rank[0]))]


# npu_moe_distribute_dispatch_v2 / combine_v2: the product constraints of the ops-transformer
# READMEs (MoeDistributeDispatchV2, MoeDistributeCombineV2; hicann/ops-transformer@c29bc10
# mc2/moe_distribute_dispatch_v2/README.md, "约束说明") that the suites' parameters can meet,
# which are at least as strict as the A2 tiling's checks
# (op_host/op_tiling/moe_distribute_dispatch_v2_tiling.cpp,
# MoeDistributeDispatchA2CheckAttrAndSetTiling and ...CheckShapeAndSetTiling; the same limits in
# combine_v2's tiling). Atlas A2 runs the fullmesh algorithm unless commAlg (left empty by the
# worker) or, for an empty commAlg, HCCL_INTRA_PCIE_ENABLE=1 with HCCL_INTRA_ROCE_ENABLE=0 asks
# for hierarchy.
MOE_SOURCE = "MoeDistributeDispatchV2 / CombineV2 README, %s constraints"


def moe_hierarchy(environ):
    """Whether the A2 kernels take the hierarchy algorithm: the worker passes no commAlg, so
    the documented environment switch decides."""
    return (environ.get("HCCL_INTRA_PCIE_ENABLE") == "1"
            and environ.get("HCCL_INTRA_ROCE_ENABLE") == "0")


def moe_unsupported(p, soc, hierarchy=False):
    """Why this device cannot run the case (None when it can), with the constraint's source."""
    fam = product_family(soc)
    h, bs, w, e, k = (int(p[n]) for n in ("hidden", "bs", "ranks", "experts", "top_k"))
    shared = int(p.get("shared_ranks", 0))
    if fam == "Atlas A2":
        alg = "hierarchy" if hierarchy else "fullmesh"
        wmax, hmax = (64, 10240) if hierarchy else (256, 7168)
        rules = [
            (shared, "shared experts are Atlas A3 only (sharedExpertRankNum must be 0)"),
            (w % 8 or not 16 <= w <= wmax,
             "ep_world_size %d: in [16, %d] and a multiple of 8 (%s)" % (w, wmax, alg)),
            (e % w or not 0 < e <= 512,
             "moe_expert_num %d: in (0, 512] and a multiple of ep_world_size %d" % (e, w)),
            (not hierarchy and e // w > 24,
             "moe_expert_num / ep_world_size = %d: at most 24 (fullmesh)" % (e // w)),
            (h % 32 or not 0 < h <= hmax,
             "H %d: a multiple of 32 in (0, %d] (%s)" % (h, hmax, alg)),
            (not 1 <= bs <= 256, "BS %d: in [1, 256]" % bs),
            (not 0 < k <= 16, "K %d: in (0, 16]" % k),
            (hierarchy and (p.get("smooth") or p.get("active") is not None),
             "hierarchy takes neither scales nor x_active_mask"),
        ]
    elif fam == "Atlas A3":
        ns = int(p.get("shared_experts", 0))
        rules = [
            (not 2 <= w <= 768, "ep_world_size %d: in [2, 768]" % w),
            (shared >= w or (w - shared) and e % (w - shared) or not 0 < e <= 1024,
             "moe_expert_num %d: in (0, 1024] and a multiple of ep_world_size - "
             "shared_expert_rank_num" % e),
            (not 0 <= ns <= 4, "shared_expert_num %d: in [0, 4]" % ns),
            (not 1024 <= h <= 8192, "H %d: in [1024, 8192]" % h),
            (not 1 <= bs <= 512, "BS %d: in [1, 512]" % bs),
            (not 0 < k <= 16 or k > e, "K %d: in (0, 16] and at most moe_expert_num" % k),
        ]
    else:
        return ("%s: MoeDistributeDispatchV2 runs on Atlas A2 and A3 only (%s)"
                % (soc, MOE_SOURCE % "product"))
    for broken, why in rules:
        if broken:
            return "%s (%s): %s (%s)" % (soc, fam, why, MOE_SOURCE % fam)
    return None

"""conform CPU stand-in for the torch_npu calls the conform worker makes (tests only; see
../README.md). Rebuilt from the CANN / torch_npu documentation, not from conform: it imports
nothing of the project (a test checks its imports), only numpy and the torch stand-in beside it.

The simulated product is CONFORM_STANDIN_SOC (default Ascend910B4, an Atlas A2 part); each API
refuses the products its page does not list, with the aclnn error the real call raises.

- npu_fused_infer_attention_score: _fia.py (semantics, rejections, uninitialised rows; INT8
  paged K/V with key/value antiquant scales and offsets, modes 0 and 1, in decode; the MLA
  decode path with query_rope / key_rope over the paged latent cache, and the V3 page's MLA
  rules).
- npu_mm_all_reduce_base (aclnnMatmulAllReduce / aclnnMatmulAllReduceV2, Atlas A2 only, 1/2/4/8
  cards): output = allreduce(x1 @ x2 + bias + x3) as the pages write it: every rank adds the
  bias and x3 IT IS PASSED to its own product, rounds that to the output dtype, and the ranks'
  rounded results are summed in the output dtype (rank order; each addition rounded).
- npu_dtype_cast(x, dtype, input_dtype=float4_e2m1fn_x2): two E2M1 codes per byte, low nibble
  first, exact; modelled on Ascend950 only (the op-plugin test of the FP4 cast runs there).
- npu_weight_quant_batchmatmul (aclnnWeightQuantBatchMatmulV2): y = x @ ((w + offset) * scale)
  + bias, per-tensor / per-channel / per-group scales; INT8 weights.
- _npu_reshape_and_cache (ATB ReshapeAndCacheOperation) and npu_scatter_nd_update_: in-place
  cache writes, bit for bit (key and value may differ in their last dimension, as the MLA
  latent and rope rows do). The first is one of torch_npu's ATB operators: it exists as an
  attribute whatever the host has, and its call loads op-plugin's ATB library, which needs
  NNAL's libatb.so (_atb.py); without it the call raises torch_npu's OSError.
- npu_dynamic_quant (aclnnDynamicQuant, Atlas A2 / A3): per-token symmetric int8 with the A2
  kernel's arithmetic as its open source writes it (hicann/ops-nn
  quant/dynamic_quant/op_kernel/dynamic_quant.h): f32 product with the smooth row, 127 divided
  by the row max of the magnitudes, the values multiplied by that quotient and cast with
  CAST_RINT, the scale stored as the quotient's reciprocal.
- npu_trans_quant_param (TransQuantParamV2, Atlas A2 / A3): the f32 scale's top 19 bits
  (truncated for round_mode 0, rounded to nearest even for 1) in the low word with bit 46 set,
  the offset rounded and clamped to [-256, 255] in bits 37..45 (hicann/ops-nn
  quant/trans_quant_param_v2/op_kernel/trans_quant_param_v2.h and aclnnTransQuantParam.md).
- npu_quant_matmul (aclnnQuantMatmulV4, Atlas A2 / A3; 2-D int8 operands, bf16/f16 output):
  the API page's table of accepted dtype combinations, and the kernels' order
  (hicann/ops-nn matmul/quant_batch_matmul_v3): int32 accumulation with an int32 bias, to f32,
  times the per-channel scale (an int64 scale read as its 19-bit f32), times the per-token
  scale (quant_batch_matmul_v3_pertoken.h; up to 128 rows the opt kernel
  quant_batch_matmul_v3_pertoken_opt.h, which multiplies the two scales together first), plus
  a float bias, CAST_RINT.
- npu_moe_distribute_dispatch_v2 / npu_moe_distribute_combine_v2 (Atlas A2 / A3; shared
  experts on A3 only): _moe.py (placement, receive order, per-token INT8 on the sender, counts,
  the combine's f32 weighted sum in k order with the shared rows unweighted).
"""
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _guard  # noqa: E402

_guard.refuse_if_real("torch_npu")

import numpy as np  # noqa: E402
import torch  # noqa: E402

if not getattr(torch, "STANDIN", False):
    raise ImportError("the conform CPU stand-in for torch_npu runs only with the torch stand-in")

from . import _atb, _fia, _moe, _soc  # noqa: E402
from ._fia import AclnnError, fail  # noqa: E402,F401

__version__ = "0.0+conform.standin"
STANDIN = True
float4_e2m1fn_x2 = torch.dtype("float4_e2m1fn_x2", np.uint8, 1)

_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def _soc_name():
    return torch.npu.get_device_name(0)


def _dev(t, what):
    if not isinstance(t, torch.Tensor):
        raise TypeError("%s must be a tensor, got %s" % (what, type(t).__name__))
    if t.device.type != "npu":
        raise RuntimeError("%s is on %s: the kernel takes NPU tensors" % (what, t.device.type))
    return t


def _to(array_f32, dt):
    """f32 -> a device tensor of `dt`, rounded to nearest even."""
    return torch.Tensor(np.ascontiguousarray(array_f32, dtype=np.float32), torch.float32,
                        "npu").to(dt)


# --------------------------------------------------------------------------- attention

def npu_fused_infer_attention_score(query, key, value, *, pse_shift=None, atten_mask=None,
                                    actual_seq_lengths=None, actual_seq_lengths_kv=None,
                                    block_table=None, query_rope=None, key_rope=None,
                                    num_heads=1, scale=1.0, pre_tokens=2147483647,
                                    next_tokens=2147483647, input_layout="BSH",
                                    num_key_value_heads=0, sparse_mode=0, inner_precise=0,
                                    block_size=0, softmax_lse_flag=False,
                                    key_antiquant_scale=None, key_antiquant_offset=None,
                                    value_antiquant_scale=None, value_antiquant_offset=None,
                                    key_antiquant_mode=0, value_antiquant_mode=0,
                                    **unsupported):
    if unsupported or pse_shift is not None:
        raise TypeError("stand-in: arguments not modelled: %s"
                        % ", ".join(sorted(list(unsupported) + (["pse_shift"] if pse_shift
                                                                 is not None else []))))
    for t, n in ((query, "query"), (key, "key"), (value, "value")):
        _dev(t, n)
    for t, n in ((atten_mask, "atten_mask"), (block_table, "block_table"),
                 (key_antiquant_scale, "key_antiquant_scale"),
                 (key_antiquant_offset, "key_antiquant_offset"),
                 (value_antiquant_scale, "value_antiquant_scale"),
                 (value_antiquant_offset, "value_antiquant_offset")):
        if t is not None:
            _dev(t, n)
    antiquant = _fia.Antiquant(key_antiquant_scale, key_antiquant_offset, value_antiquant_scale,
                               value_antiquant_offset, key_antiquant_mode, value_antiquant_mode)
    out, lse, _ = _fia.fia(_soc_name(), query, key, value, antiquant=antiquant,
                           atten_mask=atten_mask,
                           actual_seq_lengths=actual_seq_lengths,
                           actual_seq_lengths_kv=actual_seq_lengths_kv, block_table=block_table,
                           query_rope=query_rope, key_rope=key_rope, num_heads=num_heads,
                           scale=scale, pre_tokens=pre_tokens, next_tokens=next_tokens,
                           input_layout=input_layout, num_key_value_heads=num_key_value_heads,
                           sparse_mode=sparse_mode, inner_precise=inner_precise,
                           block_size=block_size, softmax_lse_flag=softmax_lse_flag)
    o = _to(out, query.dtype)
    if lse is None:  # documented: a {1} tensor of zeros when the flag is off
        lse = np.zeros(1, np.float32)
    return o, torch.Tensor(np.ascontiguousarray(lse, np.float32), torch.float32, "npu")


# --------------------------------------------------------------------------- MC2

_MC2 = "aclnnMatmulAllReduceV2"


def npu_mm_all_reduce_base(x1, x2, hcom, reduce_op="sum", bias=None, antiquant_scale=None,
                           antiquant_offset=None, x3=None, dequant_scale=None,
                           pertoken_scale=None, comm_quant_scale_1=None,
                           comm_quant_scale_2=None, antiquant_group_size=0, comm_turn=0,
                           **unsupported):
    import torch.distributed as dist
    if unsupported:
        raise TypeError("stand-in: arguments not modelled: %s" % ", ".join(sorted(unsupported)))
    for extra in (antiquant_scale, antiquant_offset, dequant_scale, pertoken_scale,
                  comm_quant_scale_1, comm_quant_scale_2):
        if extra is not None:
            raise TypeError("stand-in: the quantised MC2 variants are not modelled")
    soc = _soc_name()
    if _soc.family(soc) != "A2":
        fail(_MC2, "product %s is not supported (Atlas A2 only)" % soc,
             code="361001 ACLNN_ERR_RUNTIME_ERROR")
    if reduce_op != "sum":
        fail(_MC2, "reduceOp %s: only sum is supported" % reduce_op)
    if int(comm_turn) != 0:
        fail(_MC2, "commTurn must be 0")
    g = dist.group.WORLD
    if g.comm is None or hcom != g.comm:
        raise RuntimeError("hcom %r is not the process group's communicator" % hcom)
    if g.world not in (1, 2, 4, 8):
        fail(_MC2, "%d ranks: 1, 2, 4 or 8 cards are supported" % g.world)
    for t, n in ((x1, "x1"), (x2, "x2"), (bias, "bias"), (x3, "x3")):
        if t is not None:
            _dev(t, n)
    dt = x1.dtype
    if dt.name not in ("float16", "bfloat16") or x2.dtype is not dt:
        fail(_MC2, "x1 and x2 must share one dtype of FLOAT16/BFLOAT16")
    if bias is not None and bias.dtype is not dt:
        fail(_MC2, "bias must have the output dtype")
    if x3 is not None and x3.dtype is not dt:
        fail(_MC2, "x3 must have the output dtype")
    a, b = x1._f32(), x2._f32()
    if a.ndim not in (2, 3) or b.ndim != 2 or a.shape[-1] != b.shape[0]:
        fail(_MC2, "x1 (m, k) or (b, s, k) and x2 (k, n) expected, got %s and %s"
             % (a.shape, b.shape))
    if bias is not None and bias.shape != (b.shape[1],):
        fail(_MC2, "bias must be (n,), got %s" % (bias.shape,))
    if x3 is not None and x3.shape != a.shape[:-1] + (b.shape[1],):
        fail(_MC2, "x3 must have the output's shape, got %s" % (x3.shape,))
    y = (a.reshape(-1, a.shape[-1]) @ b).astype(np.float32)
    # The page's formula: this rank's x1 @ x2 + bias + x3 (what it is passed), rounded to the
    # output dtype, then the all-reduce in that dtype.
    mine = _mc2_epilogue(y, bias, x3, dt)
    parts = dist.exchange(mine._a, hcom)
    acc = torch.Tensor(parts[0], dt, "npu")
    for p in parts[1:]:
        acc = _to(acc._f32() + torch.Tensor(p, dt, "npu")._f32(), dt)
    return torch.Tensor(acc._a.reshape(a.shape[:-1] + (b.shape[1],)), dt, "npu")


def _mc2_epilogue(y, bias, x3, dt):
    """One rank's result in the output dtype: bias enters the matmul's f32 result before the
    conversion to the dtype; x3 is added to the converted result and rounded again (the
    ops-transformer kernel's add-x3 vector stage: bf16 widened, added in f32, cast to nearest
    even; f16 a half-precision add)."""
    if bias is not None:
        y = (y + bias._f32().reshape(1, -1)).astype(np.float32)
    out = _to(y, dt)
    if x3 is not None:
        out = _to(out._f32() + x3._f32().reshape(y.shape), dt)
    return out


# --------------------------------------------------------------------------- FP4 cast

def npu_dtype_cast(x, dtype, input_dtype=None):
    _dev(x, "input")
    if input_dtype is not float4_e2m1fn_x2:
        raise RuntimeError("stand-in: only input_dtype=float4_e2m1fn_x2 is modelled")
    soc = _soc_name()
    if _soc.family(soc) != "950":
        fail("aclnnCast", "FLOAT4_E2M1 input on product %s: modelled on Ascend950 only" % soc,
             code="361001 ACLNN_ERR_RUNTIME_ERROR")
    if dtype not in (torch.bfloat16, torch.float16, torch.float32):
        fail("aclnnCast", "cast of FLOAT4_E2M1 to %s" % dtype)
    codes = x._a
    if codes.dtype != np.uint8:
        raise RuntimeError("float4_e2m1fn_x2 input must be uint8 storage")
    pairs = np.stack([codes & 15, codes >> 4], -1).reshape(codes.shape[:-1] + (-1,))
    return _to(_E2M1[pairs], dtype)


# --------------------------------------------------------------------------- W4A16 / W8A16

_WQ = "aclnnWeightQuantBatchMatmulV2"


def npu_weight_quant_batchmatmul(x, weight, antiquant_scale, antiquant_offset=None,
                                 quant_scale=None, quant_offset=None, bias=None,
                                 antiquant_group_size=0, inner_precise=0, weight_dtype=None):
    soc = _soc_name()
    fam = _soc.family(soc)
    if fam not in ("A2", "A3", "950", "310P"):
        fail(_WQ, "product %s is not supported" % soc, code="361001 ACLNN_ERR_RUNTIME_ERROR")
    for t, n in ((x, "x"), (weight, "weight"), (antiquant_scale, "antiquant_scale")):
        _dev(t, n)
    if quant_scale is not None or quant_offset is not None or weight_dtype is not None:
        raise TypeError("stand-in: output quantisation and weight_dtype are not modelled")
    dt = x.dtype
    if dt.name not in ("float16", "bfloat16") or (fam == "310P" and dt.name != "float16"):
        fail(_WQ, "x dtype %s is not supported on %s" % (dt, soc))
    if weight.dtype is not torch.int8:
        fail(_WQ, "the stand-in models INT8 weights only, got %s" % weight.dtype)
    xa, w = x._f32(), weight._a.astype(np.float32)
    if xa.ndim != 2 or w.ndim != 2 or xa.shape[1] != w.shape[0]:
        fail(_WQ, "x (m, k) and weight (k, n) with equal k expected")
    m, k = xa.shape
    n = w.shape[1]
    if not (1 <= k <= 65535 and 1 <= n <= 65535):
        fail(_WQ, "k and n must lie in [1, 65535]")
    if antiquant_scale.dtype is not dt:
        fail(_WQ, "antiquant_scale must have x's dtype")
    s = antiquant_scale._f32()
    g = int(antiquant_group_size)
    if g:
        if fam == "310P":
            fail(_WQ, "per-group antiquant is not supported on %s" % soc)
        if g % 32 or not 32 <= g <= k - 1:
            fail(_WQ, "antiquantGroupSize %d: per-group needs a multiple of 32 in [32, k-1]" % g)
        if s.shape != (math.ceil(k / g), n):
            fail(_WQ, "per-group antiquant_scale must be (ceil(k/%d), n) = (%d, %d), got %s"
                 % (g, math.ceil(k / g), n, s.shape))
        scale = np.repeat(s, g, axis=0)[:k]
    elif s.shape in ((1,), (1, 1)):
        scale = np.full((k, n), s.reshape(()), np.float32)
    elif s.shape in ((n,), (1, n)):
        scale = np.broadcast_to(s.reshape(1, n), (k, n))
    else:
        fail(_WQ, "antiquant_scale shape %s fits no quantisation mode" % (s.shape,))
    off = 0.0
    if antiquant_offset is not None:
        if antiquant_offset.shape != antiquant_scale.shape or antiquant_offset.dtype is not dt:
            fail(_WQ, "antiquant_offset must match antiquant_scale")
        o = antiquant_offset._f32()
        off = np.repeat(o, g, axis=0)[:k] if g else np.broadcast_to(o.reshape(1, -1), (k, n))
    # The dequantised weight in x's dtype (assumed: the page gives the formula, not the
    # precision of this step), then the matmul accumulated in f32, one rounding.
    wq = _to((w + off) * scale, dt)._f32()
    y = (xa @ wq).astype(np.float32)
    if bias is not None:
        y = (y + _dev(bias, "bias")._f32().reshape(1, n)).astype(np.float32)
    return _to(y, dt)


# --------------------------------------------------------------------------- dynamic quant

_DQ = "aclnnDynamicQuant"


def _dq_stores_reciprocal(rows, h, smooth, grouped):
    """Whether the A2/A3 kernel ops-nn's dynamic_quant_tiling.cpp picks for this shape (9.x:
    SetSpecialTilingForDs key 100, CalcTilingForMultiRow key 10, then SetTilingKey by the UB a
    row needs, 196608 bytes) stores scale = 1 / (127 / max): keys 0/1, 6, 7, 8 do; keys 100,
    10 and 2/3 store max * fl32(1 / 127)."""
    if not grouped and h in (4096, 5120, 10240) and 4 <= rows <= 384:
        return False
    limit = min((196608 - 1024 - 3392) // (15 if smooth else 11) // 64 * 64, 255 * 64)
    if not grouped and 128 <= h <= limit and h % 8 == 0:
        return False
    if grouped:
        return True
    a = -(-h // 16) * 16
    single, double = (17 * a, 19 * a) if smooth else (11 * a, 13 * a)
    return single > 196608 - 1024 or double >= 196608 - 1024


def _dq_scale_form(rows, h, smooth, grouped):
    """Whether this call stores scale = 1 / (127 / max). CONFORM_STANDIN_DQ_SCALE (tests of
    `conform fingerprint`) makes the stand-in every call the one variant: `reciprocal` or
    `max_times_inverse`; unset, the tiling decides (_dq_stores_reciprocal)."""
    forced = os.environ.get("CONFORM_STANDIN_DQ_SCALE")
    if forced in ("reciprocal", "max_times_inverse"):
        return forced == "reciprocal"
    return _dq_stores_reciprocal(rows, h, smooth, grouped)


def npu_dynamic_quant(x, *, smooth_scales=None, group_index=None, dst_type=None):
    soc = _soc_name()
    if _soc.family(soc) not in ("A2", "A3"):
        fail(_DQ, "product %s is not supported" % soc, code="361001 ACLNN_ERR_RUNTIME_ERROR")
    _dev(x, "x")
    if dst_type not in (None, torch.int8):
        raise TypeError("stand-in: only int8 output is modelled")
    dt = x.dtype
    if dt.name not in ("float16", "bfloat16"):
        fail(_DQ, "x dtype %s: FLOAT16 or BFLOAT16" % dt)
    if x.dim() < 2:
        fail(_DQ, "x must have more than one dimension")
    v = x._f32()
    h = v.shape[-1]
    rows = v.reshape(-1, h)
    if smooth_scales is not None:
        _dev(smooth_scales, "smooth_scales")
        if smooth_scales.dtype is not dt:
            fail(_DQ, "smooth_scales must have x's dtype")
        s = smooth_scales._f32()
        if group_index is None:
            if s.shape != (h,):
                fail(_DQ, "smooth_scales must be 1-D of x's last dimension without group_index")
            s_rows = np.broadcast_to(s, rows.shape)
        else:
            _dev(group_index, "group_index")
            if group_index.dtype is not torch.int32:
                fail(_DQ, "group_index must be INT32")
            ends = group_index._a.astype(np.int64)
            if s.ndim != 2 or s.shape[1] != h or ends.shape != (s.shape[0],):
                fail(_DQ, "with group_index, smooth_scales is (E, last dim) and group_index (E,)")
            if np.any(np.diff(ends) < 0) or ends[-1] != rows.shape[0]:
                fail(_DQ, "group_index must not decrease and must end at the number of rows")
            # smooth_scales[i] applies to rows group_index[i-1] .. group_index[i] - 1.
            s_rows = s[np.searchsorted(ends, np.arange(rows.shape[0]), side="right")]
        rows = (rows * s_rows).astype(np.float32)
    elif group_index is not None:
        fail(_DQ, "group_index needs smooth_scales")
    amax = np.abs(rows).max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        quotient = np.float32(127.0) / amax
        if _dq_scale_form(rows.shape[0], h, smooth_scales is not None,
                          group_index is not None):
            scale = (np.float32(1.0) / quotient).astype(np.float32)
        else:
            scale = (amax * (np.float32(1.0) / np.float32(127.0))).astype(np.float32)
        q = np.rint((rows * quotient[:, None]).astype(np.float32))
    # The cast of a zero row's NaN (0 * Inf) is not documented; the stand-in writes 0.
    y = np.clip(np.where(np.isnan(q), 0, q), -128, 127).astype(np.int8)
    return (torch.Tensor(y.reshape(v.shape), torch.int8, "npu"),
            torch.Tensor(scale.reshape(v.shape[:-1]), torch.float32, "npu"))


# --------------------------------------------------------------------------- W8A8 matmul

_TQP = "aclnnTransQuantParamV2"
_QMM = "aclnnQuantMatmulV4"


def npu_trans_quant_param(scale, offset=None, round_mode=0):
    soc = _soc_name()
    if _soc.family(soc) not in ("A2", "A3"):
        fail(_TQP, "product %s is not supported" % soc, code="361001 ACLNN_ERR_RUNTIME_ERROR")
    _dev(scale, "scale")
    if scale.dtype is not torch.float32:
        fail(_TQP, "scale must be FLOAT32, got %s" % scale.dtype)
    shape = scale.shape
    if not (len(shape) == 1 or (len(shape) == 2 and shape[0] == 1)):
        fail(_TQP, "scale must be (t,) or (1, n), got %s" % (shape,))
    bits = np.ascontiguousarray(scale._a, dtype=np.float32).reshape(-1).view(np.uint32)
    bits = bits.astype(np.uint64)
    if round_mode == 0:
        low = bits & np.uint64(0xFFFFE000)
    elif round_mode == 1:
        low = np.empty_like(bits)
        for i, b in enumerate(bits.tolist()):
            e = (b >> 23) & 0xFF
            if e == 0:
                low[i] = b & 0x80000000
            elif e == 0xFF:
                low[i] = b & 0xFFFFE000
            else:
                hi, rest = b >> 13, b & 0x1FFF
                if rest > 0x1000 or (rest == 0x1000 and hi & 1):
                    hi += 1
                # A carry out of exponent 254 gives infinity (the source's saturation test,
                # exponent above 255, cannot fire on an 8-bit exponent).
                low[i] = hi << 13
    else:
        fail(_TQP, "round_mode must be 0 or 1, got %r" % (round_mode,))
    word = low | np.uint64(1 << 46)
    if offset is not None:
        _dev(offset, "offset")
        if offset.dtype is not torch.float32 or offset.shape not in (shape, (1,)):
            fail(_TQP, "offset must be FLOAT32 of scale's shape (or one element)")
        o = np.clip(np.rint(offset._a.astype(np.float32).reshape(-1)), -256, 255).astype(np.int64)
        word = word | ((o.astype(np.uint64) & np.uint64(0x1FF)) << np.uint64(37))
    return torch.Tensor(word.astype(np.int64).reshape(shape), torch.int64, "npu")


def npu_quant_matmul(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None,
                     output_dtype=None):
    soc = _soc_name()
    if _soc.family(soc) not in ("A2", "A3"):
        fail(_QMM, "product %s is not supported" % soc, code="361001 ACLNN_ERR_RUNTIME_ERROR")
    for t, n in ((x1, "x1"), (x2, "x2"), (scale, "scale")):
        _dev(t, n)
    if x1.dtype is torch.int32 or x2.dtype is torch.int32:
        raise TypeError("stand-in: int4 operands packed in int32 are not modelled")
    if x1.dtype is not torch.int8 or x2.dtype is not torch.int8:
        fail(_QMM, "x1 and x2 must both be INT8")
    if x1.dim() != 2 or x2.dim() != 2:
        raise TypeError("stand-in: only 2-D operands are modelled")
    (m, k), (k2, n) = x1.shape, x2.shape
    if k != k2:
        fail(_QMM, "x1 (m, k) and x2 (k, n) must share k: %s, %s" % (x1.shape, x2.shape))
    # None means int8 (the page: the default output is INT8).
    int8_out = output_dtype in (None, torch.int8)
    if not int8_out and output_dtype not in (torch.float16, torch.bfloat16):
        fail(_QMM, "output_dtype must be int8, float16 or bfloat16, got %s" % output_dtype)
    sd = scale.dtype
    if sd not in (torch.float32, torch.int64, torch.bfloat16):
        fail(_QMM, "scale must be FLOAT32, INT64 or BFLOAT16, got %s" % sd)
    if scale.shape not in ((1,), (n,)):
        fail(_QMM, "scale must be (1,) or (n,) = (%d,), got %s" % (n, scale.shape))
    if offset is not None:
        if not int8_out:
            fail(_QMM, "offset is for the int8 output only")
        _dev(offset, "offset")
        if offset.dtype is not torch.float32 or offset.shape not in ((1,), (n,)):
            fail(_QMM, "offset must be FLOAT32 (1,) or (n,) = (%d,)" % n)
    if int8_out:
        # The page's table: an int8 output takes the INT64 scale, no pertoken_scale, an
        # INT32 bias or none.
        if sd is not torch.int64:
            fail(_QMM, "an int8 output takes the INT64 scale of npu_trans_quant_param")
        if pertoken_scale is not None:
            fail(_QMM, "an int8 output takes no pertoken_scale")
        if bias is not None and bias.dtype is not torch.int32:
            fail(_QMM, "an int8 output takes an INT32 bias or none")
    bf16_out = output_dtype is torch.bfloat16
    if pertoken_scale is not None:
        _dev(pertoken_scale, "pertoken_scale")
        if pertoken_scale.dtype is not torch.float32 or pertoken_scale.shape != (m,):
            fail(_QMM, "pertoken_scale must be FLOAT32 (m,) = (%d,)" % m)
        if sd is torch.int64:
            fail(_QMM, "an INT64 scale takes no pertoken_scale")
    # The page's table of combinations (int8 operands, float output).
    if sd is torch.int64 and bf16_out:
        fail(_QMM, "an INT64 scale gives a float16 (or int8) output, not bfloat16")
    if sd is torch.bfloat16 and not bf16_out:
        fail(_QMM, "a BFLOAT16 scale gives a bfloat16 output")
    if sd is torch.float32 and not bf16_out and pertoken_scale is None:
        fail(_QMM, "a float16 output without pertoken_scale takes the INT64 scale of "
                   "npu_trans_quant_param")
    bias_int = None
    bias_f = None
    if bias is not None:
        _dev(bias, "bias")
        if bias.shape != (n,):
            raise TypeError("stand-in: only a 1-D (n,) bias is modelled")
        allowed = (torch.int32,) if sd is torch.int64 else (
            (torch.int32, torch.bfloat16, torch.float32) if bf16_out
            else (torch.int32, torch.float16, torch.float32))
        if bias.dtype not in allowed:
            fail(_QMM, "bias dtype %s is not accepted with this scale and output" % bias.dtype)
        if bias.dtype is torch.int32:
            bias_int = bias._a.astype(np.int64)
        else:
            bias_f = bias._f32()
    # int8 products summed exactly (every partial sum an integer below 2^31, exact in f64).
    acc = (x1._a.astype(np.float64) @ x2._a.astype(np.float64)).astype(np.int64)
    if bias_int is not None:
        acc = (acc + bias_int[None, :] + 2**31) % 2**32 - 2**31
    y = acc.astype(np.float32)
    if sd is torch.int64:
        # The fixpipe reads the 19-bit f32 the low word holds.
        s = (scale._a.astype(np.int64).astype(np.uint64) & np.uint64(0xFFFFE000))
        s = s.astype(np.uint32).view(np.float32)
    else:
        s = scale._f32().astype(np.float32)
    if pertoken_scale is not None and m <= 128:
        # ProcessMSmall (quant_batch_matmul_v3_tiling.cpp) sends per-token cases whose M fits
        # the base M to the opt kernel (quant_batch_matmul_v3_pertoken_opt.h), whose
        # MulPertokenAndScale merges the two scales before they meet the accumulator.
        t = pertoken_scale._a.astype(np.float32)
        y = (y * (t[:, None] * s.reshape(1, -1)).astype(np.float32)).astype(np.float32)
    else:
        y = (y * s.reshape(1, -1)).astype(np.float32)
    if int8_out:
        # Requantisation (ops-nn's requant golden): the scaled f32 rounded to an integer, ties
        # to even, clipped to 9 bits, plus the word's 9-bit offset (bits 37..45, signed),
        # clipped to int8.
        w = scale._a.astype(np.int64).astype(np.uint64).reshape(-1)
        o = ((w >> np.uint64(37)) & np.uint64(0x1FF)).astype(np.int64)
        o = np.where(o & 0x100, o - 0x200, o)
        v = np.clip(np.rint(y), -256, 255) + o.reshape(1, -1)
        return torch.Tensor(np.clip(v, -128, 127).astype(np.int8), torch.int8, "npu")
    if pertoken_scale is not None and m > 128:
        y = (y * pertoken_scale._a.astype(np.float32)[:, None]).astype(np.float32)
    if bias_f is not None:
        y = (y + bias_f.reshape(1, n)).astype(np.float32)
    return _to(y, output_dtype)


# --------------------------------------------------------------------------- cache writes

def _npu_reshape_and_cache(key, value, key_cache, value_cache, slot_indices):
    """ATB ReshapeAndCacheOperation: key/value [T, N, D] into caches [blocks, bs, N, D] at
    slot = block * bs + offset; in place."""
    api = "ReshapeAndCacheOperation"
    _atb.load()
    soc = _soc_name()
    if _soc.family(soc) not in ("A2", "A3", "310P"):
        fail(api, "product %s is not supported" % soc, code="361001 ACLNN_ERR_RUNTIME_ERROR")
    for t, n in ((key, "key"), (value, "value"), (key_cache, "key_cache"),
                 (value_cache, "value_cache"), (slot_indices, "slot_indices")):
        _dev(t, n)
    dts = {t.dtype.name for t in (key, value, key_cache, value_cache)}
    if len(dts) != 1 or dts.pop() not in ("float16", "bfloat16", "int8"):
        fail(api, "key, value and both caches must share one dtype of float16/bfloat16/int8")
    slots = slot_indices._a
    if slots.dtype != np.int32 or slots.ndim != 1:
        fail(api, "slotMapping must be int32 [num_tokens]")
    for x, c, n in ((key, key_cache, "key"), (value, value_cache, "value")):
        if x._a.ndim != 3 or c._a.ndim != 4 or c._a.shape[2:] != x._a.shape[1:]:
            fail(api, "%s [T, N, D] and its cache [blocks, bs, N, D] expected" % n)
        if x._a.shape[0] != slots.shape[0]:
            fail(api, "%s has %d tokens, slotMapping %d" % (n, x._a.shape[0], slots.shape[0]))
        blocks, bs = c._a.shape[:2]
        if slots.size and (slots.min() < 0 or slots.max() >= blocks * bs):
            fail(api, "a slot lies outside the cache (negative slots are not documented)")
        c._a[slots // bs, slots % bs] = x._a
    return None


def npu_scatter_nd_update_(input, indices, updates):  # noqa: A002
    api = "aclnnScatterNdUpdate"
    soc = _soc_name()
    fam = _soc.family(soc)
    for t, n in ((input, "input"), (indices, "indices"), (updates, "updates")):
        _dev(t, n)
    if input.dtype is not updates.dtype:
        fail(api, "input and updates must share one dtype")
    allowed = {"float32", "float16", "bool"}
    if fam in ("A2", "A3"):
        allowed |= {"bfloat16", "int64", "int8"}
    if input.dtype.name not in allowed:
        fail(api, "dtype %s is not supported on %s" % (input.dtype, soc))
    a, idx, up = input._a, indices._a, updates._a
    if idx.dtype not in (np.int32, np.int64) or idx.ndim < 2:
        fail(api, "indices must be int32/int64 with at least 2 dimensions")
    depth = idx.shape[-1]
    if not 1 <= a.ndim <= 8 or depth > a.ndim:
        fail(api, "the last dimension of indices exceeds the input's rank")
    if up.shape != idx.shape[:-1] + a.shape[depth:]:
        fail(api, "updates shape %s, expected %s" % (up.shape, idx.shape[:-1] + a.shape[depth:]))
    flat = idx.reshape(-1, depth)
    if flat.size and ((flat < 0).any() or (flat >= np.array(a.shape[:depth])).any()):
        fail(api, "an index lies out of range (not supported)")
    a[tuple(flat.T)] = up.reshape((-1,) + a.shape[depth:])
    return input


# --------------------------------------------------------------------------- MoE dispatch / combine

npu_moe_distribute_dispatch_v2 = _moe.dispatch_v2
npu_moe_distribute_combine_v2 = _moe.combine_v2

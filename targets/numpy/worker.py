"""numpy worker: a straightforward attention (f32 scores and softmax through BLAS matmuls,
one rounding to the output dtype) and W4A16 matmul (FP4 weights decoded by table, scaled in
f32, X @ W through BLAS in f32, one rounding) — an independent implementation with a
different operation order from the reference, to show tolerance policies accept correct
kernels. PA cases gather KV through the block table first. dynamic_quant: the documented
per-token INT8 arithmetic, row-vectorised (judged bit for bit). pa_decode_int8:
vLLM-Ascend's documented 16-bit write of the new K/V rows into the INT8 cache (equal to the
recipe's bit for bit, judged within one step), dequantisation (y + offset) * scale in f64 and
the same f32 attention. quant_matmul: the documented W8A8 epilogue on an exact integer matmul
(judged bit for bit). moe_dispatch_combine: the documented dispatch order, INT8 quantisation
and k-ordered f32 combine, vectorised (judged bit for bit). mla_decode: the latent cache write
as a scatter of raw bits (judged bit for bit), then per sequence the latent rows gathered
through the block table and all heads at once in f32 through BLAS: q_nope @ c_kv^T plus
q_rope @ k_rope^T, times the scale, softmax, @ c_kv, one rounding (LSE = max + log(sum))."""
import sys

import conform_worker as cw

try:
    import numpy as np

    import conform_attention as ca
    import conform_fp4 as f4
except Exception as e:  # pragma: no cover
    cw.unavailable("import failed: %s" % e)


def attention(case):
    g = ca.Geometry(case.params)
    dt = case.input_dtypes[ca.INPUTS["query"]]
    q, k, v = ca.inputs_bnsd(case, g, case.input_dtypes.get)
    q, k, v = (cw.to_f32(x, dt) for x in (q, k, v))
    mask = case.inputs.get(ca.INPUTS["mask"]) if case.params.get("atten_mask") else None
    out = np.zeros((g.batch, g.heads, g.q_seq, g.head_dim), dtype=np.float32)
    lse = np.full((g.batch, g.heads, g.q_seq), np.inf, dtype=np.float32)
    for b in range(g.batch):
        ok = g.allowed(b, mask)
        rows = ok.any(axis=1)
        # Keys no row may see (beyond the actual KV length: the harness fills them with NaN)
        # must not reach P.V, where 0 * NaN would still be NaN.
        unused = ~ok.any(axis=0)
        for h in range(g.heads):
            kh = h // g.group
            s = (q[b, h] @ k[b, kh].T) * np.float32(g.scale)
            s = np.where(ok, s, -np.inf)
            m = np.max(s, axis=1, where=ok, initial=-np.inf)
            m_safe = np.where(rows, m, 0).astype(np.float32)
            p = np.where(ok, np.exp(s - m_safe[:, None]), 0).astype(np.float32)
            l = p.sum(axis=1, dtype=np.float32)
            o = p @ np.where(unused[:, None], np.float32(0), v[b, kh])
            with np.errstate(invalid="ignore", divide="ignore"):
                o = o / l[:, None]
                lse[b, h] = np.where(rows, m_safe + np.log(l), np.inf)
            out[b, h] = np.where(rows[:, None], o, 0)
    res = {ca.OUTPUTS["out"]: cw.from_f32(ca.output_from_bnsd(out, g), dt)}
    if g.lse_flag:
        res[ca.OUTPUTS["lse"]] = ca.lse_to_layout(lse, g)
    case.note("numpy attention: f32 scores/softmax via BLAS, one rounding at the end")
    if case.op == "pa_decode":
        case.note("paged KV gathered through the block table first")
    return res


def w4a16(case):
    t = f4.TENSORS["w4a16_matmul"]
    p = case.params
    fmt = p.get("format", "mxfp4")
    x = cw.to_f32(case.inputs[t["x"]], case.input_dtypes[t["x"]])
    codes = f4.unpack(case.inputs[t["codes"]], p.get("packing", "low_first"))
    k = codes.shape[-1]
    w = f4.E2M1[codes]
    if fmt == "mxfp4":
        s = f4.e8m0_to_f32(case.inputs[t["scale"]])
        w = w * f4.group_scale(s, k, int(p.get("group_size", 32)))
    elif fmt == "nvfp4":
        s = f4.E4M3[case.inputs[t["scale"]]] * case.inputs[t["global"]].astype(np.float32).reshape(())
        w = w * f4.group_scale(s, k, int(p.get("group_size", 16)))
    else:
        raise cw.Unsupported("w4a16 format %s" % fmt)
    y = x @ w.astype(np.float32).T
    out_dt = case.output_dtypes[t["out"]]
    case.note("numpy w4a16: dequant to f32, BLAS f32 matmul, one rounding")
    return {t["out"]: cw.from_f32(y, out_dt)}


# paged_kv tensor names (the kv family's): inputs key, value [T, N, D], slot_mapping [T]
# (-1 = padding), key_cache_in, value_cache_in; outputs key_cache_out, value_cache_out.
KV_LAYOUTS = ("BnBsH", "BnNBsD", "vllm")


def paged_kv(case):
    """Reshape-and-cache by numpy fancy indexing, bitwise (rows moved as unsigned ints)."""
    p = case.params
    layout = p["layout"]
    if layout not in KV_LAYOUTS:
        raise cw.Unsupported("layout %s" % layout)
    bs = int(p["block_size"])
    slots = np.asarray(case.inputs["slot_mapping"]).astype(np.int64)
    valid = slots >= 0
    blk, sl = slots[valid] // bs, slots[valid] % bs
    out = {}
    for which in ("key", "value"):
        cache_in = case.inputs[which + "_cache_in"]
        bits = np.dtype("u%d" % cache_in.dtype.itemsize)
        cache = np.array(cache_in).view(bits)
        rows = np.asarray(case.inputs[which]).view(bits)[valid]  # [t, N, D]
        t, n, d = rows.shape
        if layout == "BnBsH":
            cache[blk, sl] = rows.reshape(t, n * d)
        elif layout == "BnNBsD":
            cache[blk, :, sl] = rows
        elif which == "key":  # vllm key [blocks, N, D/x, bs, x], x = 16 bytes of elements
            x = 16 // cache_in.dtype.itemsize
            cache[blk, :, :, sl, :] = rows.reshape(t, n, d // x, x)
        else:  # vllm value [blocks, N, D, bs]
            cache[blk, :, :, sl] = rows
        out[which + "_cache_out"] = cache.view(cache_in.dtype)
    case.note("numpy fancy-index scatter, bitwise")
    return out


def dynamic_quant_stores_reciprocal(rows, row_len, smooth, groups):
    """Whether the A2 kernel the host tiling picks for this shape (CANN 9.x, docs/ascend.md
    "dynamic_quant") stores scale = 1 / r (keys 0/1, 6, 7, 8) rather than amax * fl32(1/127)
    (keys 100, 10, 2/3)."""
    if groups is None and row_len in (4096, 5120, 10240) and 4 <= rows <= 384:
        return False  # key 100, single-row
    limit = (196608 - 1024 - 3392) // (15 if smooth else 11) // 64 * 64
    if groups is None and 128 <= row_len <= min(limit, 255 * 64) and row_len % 8 == 0:
        return False  # key 10, multi-row
    if groups is not None:
        return True  # keys 7 / 8
    a = -(-row_len // 16) * 16
    usable = 196608 - 1024
    single, double = (17 * a, 19 * a) if smooth else (11 * a, 13 * a)
    if single > usable:
        return True  # key 6, large shape
    return double >= usable  # keys 0/1 when no double-buffered row fits, else 2/3


def dynamic_quant(case):
    """Per-token INT8 quantisation from the documented arithmetic, row-vectorised in numpy f32:
    v = x * smooth (f32), amax = max |v| per row; `ascend_a2`: r = 127 / amax, q = v * r, and
    the scale of the kernel the A2 tiling picks for the shape: 1 / r, or amax * fl32(1 / 127);
    `ops_nn_golden`: scale = amax * (1 / 127), q = v / scale; then np.rint (ties to even), a
    zero row's NaN to 0, clip to [-128, 127]."""
    p = case.params
    dt = case.input_dtypes["x"]
    x = cw.to_f32(case.inputs["x"], dt)
    if p.get("smooth"):
        s = cw.to_f32(case.inputs["smooth_scales"], dt)
        if p.get("groups"):
            ends = np.asarray(case.inputs["group_index"]).astype(np.int64)
            if np.any(np.diff(ends) < 0) or ends[-1] != x.shape[0]:
                raise ValueError("group_index must ascend and end at the row count")
            # Row r takes the first group whose end exceeds r.
            s = s[np.searchsorted(ends, np.arange(x.shape[0]), side="right")]
        v = np.multiply(x, s, dtype=np.float32)
    else:
        v = x
    amax = np.max(np.abs(v), axis=1)
    one, qmax = np.float32(1), np.float32(127)
    with np.errstate(divide="ignore", invalid="ignore"):
        if case.recipe == "ascend_a2":
            r = qmax / amax
            if dynamic_quant_stores_reciprocal(x.shape[0], x.shape[1], bool(p.get("smooth")),
                                               p.get("groups")):
                scale = one / r
            else:
                scale = amax * (one / qmax)
            q = v * r[:, None]
        elif case.recipe == "ops_nn_golden":
            scale = amax * (one / qmax)
            q = v / scale[:, None]
        else:
            raise cw.Unsupported("dynamic_quant recipe %s" % case.recipe)
    q = np.clip(np.nan_to_num(np.rint(q), nan=0.0), -128, 127).astype(np.int8)
    case.note("numpy dynamic_quant: f32 row-vectorised, np.rint (ties to even)")
    return {"y": q, "scale": scale.astype(np.float32)}


def _to_dtype(x, dt):
    """float32 values rounded once (RNE) to the rows' dtype, back as float32."""
    if dt == "BF16":
        return cw.bf16_bits_to_f32(cw.f32_to_bf16_bits(x))
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float32)


def _c8_write(x, s, o, mode, dt):
    """vLLM-Ascend's C8 write as torch computes it on the rows' dtype: inv = 1 / s (an f32
    division, rounded to the dtype per-channel), then x * inv and that minus FIA's offset, each
    rounded to the dtype (per-token, with f32 parameters, both stay f32); np.rint (ties to
    even), clip to [-128, 127]."""
    with np.errstate(divide="ignore"):
        inv = np.float32(1) / s
    if mode == 0:
        inv = _to_dtype(inv, dt)
        v = _to_dtype(_to_dtype(x * inv, dt) - o, dt)
    else:
        v = x * inv - o
    return np.clip(np.rint(v), -128, 127).astype(np.int8)


def pa_decode_int8(case):
    """Quantise-on-write into an INT8 paged cache, then decode attention over it. The new rows
    are written with the documented 16-bit arithmetic (`_c8_write`, judged bit for bit), the
    cache dequantised as (y + offset) * scale in f64 (exact for these parameters), and the
    attention is the f32 BLAS one above, gathered through the block table."""
    p = case.params
    g = ca.Geometry(p)
    dt = case.input_dtypes["query"]
    bs = int(p.get("block_size", 128))
    layout = p.get("cache_layout", "BnBsH")
    new = int(p.get("new_tokens", 1))
    kvh, d = g.kv_heads, g.head_dim
    table = np.asarray(case.inputs["block_table"]).astype(np.int64)
    seq = table.shape[1] * bs
    lk = [int(x) for x in p["actual_seq_lengths_kv"]]
    slots = np.asarray(case.inputs["slot_mapping"]).astype(np.int64)
    rows = np.arange(len(slots))
    b_of, pos_of = rows // new, np.array([lk[r // new] - new + r % new for r in rows])
    out, deq = {}, {}
    for which in ("key", "value"):
        mode = int(p.get(which + "_antiquant_mode", 0))
        sname, oname = which + "_antiquant_scale", which + "_antiquant_offset"
        scale = cw.to_f32(case.inputs[sname], case.input_dtypes[sname])
        if p.get("antiquant_offset"):
            off = cw.to_f32(case.inputs[oname], case.input_dtypes[oname])
        else:
            off = np.zeros_like(scale)
        if mode == 0:  # [1, KV_N, D]: one per channel
            s_rows, o_rows = scale.reshape(1, kvh, d), off.reshape(1, kvh, d)
        else:  # [1, B, S]: one per (sequence, position)
            s_rows = scale.reshape(-1, seq)[b_of, pos_of][:, None, None]
            o_rows = off.reshape(-1, seq)[b_of, pos_of][:, None, None]
        x = cw.to_f32(case.inputs[which], case.input_dtypes[which])
        q = _c8_write(x, s_rows, o_rows, mode, dt)  # [T, KV_N, D]
        cache = np.array(case.inputs[which + "_cache_in"]).astype(np.int8)
        blk, sl = slots // bs, slots % bs
        if layout == "BnBsH":
            cache[blk, sl] = q.reshape(len(slots), kvh * d)
        else:
            cache[blk, :, sl] = q
        out[which + "_cache_out"] = cache
        kv = ca.gather_paged(cache.astype(np.float64), table, lk, bs, layout, kvh, d, seq)
        s64, o64 = scale.astype(np.float64), off.astype(np.float64)
        if mode == 0:
            kv = (kv + o64.reshape(1, kvh, 1, d)) * s64.reshape(1, kvh, 1, d)
        else:
            kv = (kv + o64.reshape(-1, seq)[:, None, :, None]) * s64.reshape(-1, seq)[:, None, :, None]
        deq[which] = kv.astype(np.float32)
    qv = cw.to_f32(ca.to_bnsd(case.inputs["query"], g.layout, g.heads, d), dt)
    res = np.zeros((g.batch, g.heads, 1, d), dtype=np.float32)
    for b in range(g.batch):
        n = lk[b]
        for h in range(g.heads):
            kh = h // g.group
            s = (qv[b, h] @ deq["key"][b, kh, :n].T) * np.float32(g.scale)
            e = np.exp(s - s.max(axis=1, keepdims=True)).astype(np.float32)
            res[b, h] = (e @ deq["value"][b, kh, :n]) / e.sum(axis=1, keepdims=True)
    out[ca.OUTPUTS["out"]] = cw.from_f32(ca.output_from_bnsd(res, g), dt)
    case.note("numpy pa_decode_int8: 16-bit torch-style write, f64 dequantisation, f32 BLAS attention")
    return out
def quant_matmul(case):
    """W8A8 from the documented arithmetic (aclnnQuantMatmulV4's formulas, the kernel's order):
    x1 @ x2 exactly (int8 products summed in f64 through BLAS: every partial sum is an integer
    below 2^31, exact in f64), an int32 bias added as integers (wrapping at 32 bits), the sum
    to f32 (round to nearest even), times the per-channel scale in f32 (the packed form keeps
    the f32's top 19 bits, truncated, as npu_trans_quant_param writes them) and the per-token
    scale in f32 (up to 128 rows the two scales multiplied together first, as the opt kernel
    the A2 tiling picks there does; above, the per-channel scale first), plus a float bias in
    f32, one rounding to the output dtype; for an
    int8 output the scaled f32 is requantised with the packed offset instead."""
    p = case.params
    if case.recipe != "ascend_a2":
        raise cw.Unsupported("quant_matmul recipe %s" % case.recipe)
    x1 = np.asarray(case.inputs["x1"]).astype(np.float64)
    x2 = np.asarray(case.inputs["x2"]).astype(np.float64)
    acc = (x1 @ x2).astype(np.int64)
    bias = case.inputs.get("bias")
    bias_dt = case.input_dtypes.get("bias")
    if bias is not None and bias_dt == "I32":
        acc = acc + np.asarray(bias).astype(np.int64)[None, :]
        acc = (acc + 2**31) % 2**32 - 2**31
    y = acc.astype(np.float32)
    scale = cw.to_f32(case.inputs["scale"], case.input_dtypes["scale"])
    if p.get("scale", "f32") == "packed":
        scale = (scale.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    out_dt = case.output_dtypes["y"]
    if out_dt == "I8":
        # Requantisation (ops-nn's requant golden): fl32(acc * scale) rounded to an integer,
        # ties to even, clipped to 9 bits, plus the offset npu_trans_quant_param packs (rounded
        # ties to even, clipped to [-256, 255]), clipped to int8.
        v = np.clip(np.rint(y * scale[None, :]), -256, 255)
        off = case.inputs.get("offset")
        if off is not None:
            off = np.clip(np.rint(np.asarray(off, dtype=np.float32)), -256, 255)
            v = v + off[None, :]
        case.note("numpy quant_matmul: exact f64 BLAS matmul of the int8 operands, f32 scale, "
                  "requantised to int8 (ties to even, saturated)")
        return {"y": np.clip(v, -128, 127).astype(np.int8)}
    if p.get("pertoken"):
        t = np.asarray(case.inputs["pertoken_scale"], dtype=np.float32)
        if x1.shape[0] <= 128:
            # The A2 tiling sends per-token cases of small M to the opt kernel, which merges
            # the two scales first: acc * fl32(pertoken * scale) (docs/ascend.md).
            y = y * (t[:, None] * scale[None, :])
        else:
            y = (y * scale[None, :]) * t[:, None]
    else:
        y = y * scale[None, :]
    if bias is not None and bias_dt != "I32":
        y = y + cw.to_f32(bias, bias_dt)[None, :]
    case.note("numpy quant_matmul: exact f64 BLAS matmul of the int8 operands, f32 epilogue, one rounding")
    return {"y": cw.from_f32(y.astype(np.float32), out_dt)}


def moe_dispatch_combine(case):
    """The dispatch/combine round trip from the documented arithmetic, vectorised over rows and
    tokens: rows gathered per destination rank and sorted by (local expert, source, t * K + k)
    (shared-expert rows by source and token); per-row INT8 quantisation in f32 (r = 127 / amax,
    scale = 1 / r, np.rint ties to even) with the destination's smooth row; the expert step
    (q * scale, times the expert's gain, one RNE rounding to the dtype); the combine as f32
    numpy adds over k in order, then the shared rows unweighted, one RNE rounding at the end."""
    p = case.params
    W, BS, H, E, K = (int(p[n]) for n in ("ranks", "bs", "hidden", "experts", "top_k"))
    ns, S = int(p.get("shared_experts", 0)), int(p.get("shared_ranks", 0))
    L, per = E // (W - S), (S // ns if ns else 1)
    quant = int(p.get("quant_mode", 0)) == 2
    dt = case.input_dtypes["x"]
    x = cw.to_f32(case.inputs["x"], dt).reshape(W, BS, H)
    ids = np.asarray(case.inputs["expert_ids"]).astype(np.int64).reshape(W, BS, K)
    wts = np.asarray(case.inputs["expert_scales"], dtype=np.float32).reshape(W, BS, K)
    gain = cw.to_f32(case.inputs["expert_gain"], case.input_dtypes["expert_gain"])
    smooth = np.asarray(case.inputs["scales"], dtype=np.float32) if p.get("smooth") else None
    active = [int(a) for a in p["active"]] if p.get("active") is not None else [BS] * W
    if "x_active_mask" in case.inputs:
        m = np.asarray(case.inputs["x_active_mask"]).astype(np.int64).reshape(W, BS)
        want = (np.arange(BS)[None, :] < np.asarray(active)[:, None]).astype(np.int64)
        if not np.array_equal(m, want):
            raise ValueError("x_active_mask must hold each rank's active tokens first")
    if np.any((ids < 0) | (ids >= E)):
        raise ValueError("expert_ids outside [0, experts)")
    # (sort key, source, token, slot, smooth row, gain row) per destination rank.
    recv = [[] for _ in range(W)]
    for s in range(W):
        for t in range(active[s]):
            if len(set(ids[s, t].tolist())) != K:
                raise ValueError("expert_ids: an expert twice in one row")
            for k in range(K):
                e = int(ids[s, t, k])
                recv[e // L + S].append(((e % L, s, t * K + k), s, t, k, ns + e, ns + e))
            for i in range(ns):
                recv[i * per + s % per].append(((0, s, t), s, t, K + i, i, i))
    rows, nums = [], []
    for d in range(W):
        rr = sorted(recv[d], key=lambda r: r[0])
        rows.extend(rr)
        if d < S:
            nums.append(len(rr))
        else:
            c = np.bincount([r[0][0] for r in rr], minlength=L).astype(np.int64)
            nums.extend((np.cumsum(c) if int(p.get("expert_token_nums_type", 1)) == 0 else c).tolist())
    src = np.array([r[1] for r in rows], dtype=np.int64)
    tok = np.array([r[2] for r in rows], dtype=np.int64)
    srow = np.array([r[4] for r in rows], dtype=np.int64)
    grow = np.array([r[5] for r in rows], dtype=np.int64)
    xr = x[src, tok]
    out = {}
    if quant:
        v = xr * smooth[srow] if smooth is not None else xr
        amax = np.max(np.abs(v), axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.float32(127) / amax
            scale = np.float32(1) / r
            q = np.clip(np.nan_to_num(np.rint(v * r[:, None]), nan=0.0), -128, 127).astype(np.int8)
        out["expand_x"] = q
        out["dynamic_scales"] = scale.astype(np.float32)
        deq = q.astype(np.float32) * scale[:, None]
    else:
        out["expand_x"] = cw.from_f32(xr, dt)
        deq = xr
    y = _to_dtype(deq * gain[grow][:, None], dt)
    slot_of = {(int(s_), int(t_), int(k_)): i for i, (s_, t_, k_) in
               enumerate(zip(src, tok, (r[3] for r in rows)))}
    toks = [(s, t) for s in range(W) for t in range(active[s])]
    acc = np.zeros((len(toks), H), dtype=np.float32)
    for k in range(K):
        at = np.array([slot_of[(s, t, k)] for s, t in toks], dtype=np.int64)
        wk = np.array([wts[s, t, k] for s, t in toks], dtype=np.float32)
        acc = acc + y[at] * wk[:, None]
    for i in range(ns):
        at = np.array([slot_of[(s, t, K + i)] for s, t in toks], dtype=np.int64)
        acc = acc + y[at]
    out["expert_token_nums"] = np.array(nums, dtype=np.int64)
    out["out"] = cw.from_f32(acc, dt)
    case.note("numpy moe_dispatch_combine: sorted gathers, f32 row-vectorised quantisation and k-ordered f32 sum")
    return out


def mla_decode(case):
    """DeepSeek MLA decode over the paged latent cache, written from the documented semantics
    (not from the reference's recipe). First this step's rows are scattered into copies of the
    two caches by slot mapping, moved as raw bits. Then for each sequence the first
    actual_seq_lengths_kv rows of both caches are gathered through the block table (after the
    write) and every head is done at once in f32 through BLAS: scores = q_nope @ c_kv^T +
    q_rope @ k_rope^T (two matmuls, then one add), times the scale as f32, softmax with the
    row max subtracted, P @ c_kv (the values are the latent rows), divided by the sum, one RNE
    rounding to the dtype; LSE = max + log(sum) in f32."""
    p = case.params
    dt = case.input_dtypes["query"]
    layout = p.get("input_layout", "BNSD")
    if layout not in ("BNSD", "BSND"):
        raise cw.Unsupported("mla_decode input_layout %s" % layout)
    bs = int(p["block_size"])
    lens = [int(x) for x in p["actual_seq_lengths_kv"]]
    slots = np.asarray(case.inputs["slot_mapping"]).astype(np.int64)
    ok = slots >= 0
    out, cache = {}, {}
    for rows, name in (("kv", "kv_cache"), ("k_rope", "rope_cache")):
        c_in = case.inputs[name + "_in"]
        bits = np.dtype("u%d" % c_in.dtype.itemsize)
        c = np.array(c_in).view(bits)  # [blocks, 1, bs, D]
        new = np.asarray(case.inputs[rows]).view(bits)[ok]  # [t, 1, D]
        c[slots[ok] // bs, 0, slots[ok] % bs] = new[:, 0]
        out[name + "_out"] = c.view(c_in.dtype)
        cache[name] = out[name + "_out"][:, 0]  # [blocks, bs, D], the dtype's storage
    q = cw.to_f32(case.inputs["query"], dt)
    qr = cw.to_f32(case.inputs["query_rope"], dt)
    if layout == "BSND":  # [B, 1, N, D] -> [B, N, 1, D]
        q, qr = q.transpose(0, 2, 1, 3), qr.transpose(0, 2, 1, 3)
    batch, heads = q.shape[0], q.shape[1]
    table = np.asarray(case.inputs["block_table"]).astype(np.int64)
    scale = np.float32(float(p["scale"]))
    res = np.zeros((batch, heads, 512), dtype=np.float32)
    lse = np.zeros((batch, heads), dtype=np.float32)
    for b in range(batch):
        t = np.arange(lens[b])
        blk, off = table[b, t // bs], t % bs
        c_kv = cw.to_f32(cache["kv_cache"][blk, off], dt)  # [L, 512]
        k_pe = cw.to_f32(cache["rope_cache"][blk, off], dt)  # [L, 64]
        s = (q[b, :, 0] @ c_kv.T + qr[b, :, 0] @ k_pe.T) * scale  # [N, L]
        m = s.max(axis=1, keepdims=True)
        e = np.exp(s - m).astype(np.float32)
        total = e.sum(axis=1, dtype=np.float32)
        res[b] = (e @ c_kv) / total[:, None]
        lse[b] = m[:, 0] + np.log(total)
    o = res[:, :, None, :]  # [B, N, 1, 512]
    if layout == "BSND":
        o = o.transpose(0, 2, 1, 3)
    out["attention_out"] = cw.from_f32(np.ascontiguousarray(o), dt)
    if p.get("softmax_lse_flag"):
        out["softmax_lse"] = np.ascontiguousarray(lse[:, :, None, None], dtype=np.float32)
    case.note("numpy mla_decode: bitwise scatter of the new latent rows, f32 BLAS scores "
              "(nope + rope), softmax and P @ c_kv, one rounding")
    return out


ATTN_CAPS = {"dtypes": ["f32", "f16", "bf16"],
             "layouts": ["BSND", "BNSD", "BSH", "TND", "BNSD_BSND"],
             "limits": {"sparse_mode": {"one_of": [0, 2, 3, 4]}},
             "recipes": ["numpy_f32_blas"]}
if __name__ == "__main__":
    cw.serve(
        name="numpy",
        version="1",
        ops={"fa_prefill": attention, "pa_decode": attention, "w4a16_matmul": w4a16,
             "paged_kv": paged_kv, "dynamic_quant": dynamic_quant,
             "pa_decode_int8": pa_decode_int8,
             "quant_matmul": quant_matmul, "moe_dispatch_combine": moe_dispatch_combine,
             "mla_decode": mla_decode},
        capabilities={"ops": {
            "fa_prefill": ATTN_CAPS,
            "pa_decode": dict(ATTN_CAPS, notes="PA runs by gathering KV through the block table first"),
            "w4a16_matmul": {"dtypes": ["bf16", "f16", "f32"], "recipes": ["numpy_f32_blas"],
                             "limits": {"packing": {"one_of": ["low_first", "high_first"]},
                                        "element": {"one_of": ["e2m1"]}}},
            "paged_kv": {"dtypes": ["bf16", "f16", "f32"], "layouts": list(KV_LAYOUTS),
                         "recipes": ["reference"]},
            "dynamic_quant": {"dtypes": ["bf16", "f16"], "recipes": ["ascend_a2", "ops_nn_golden"]},
            "pa_decode_int8": {"dtypes": ["bf16", "f16"], "layouts": ["BSND", "BNSD", "BSH"],
                               "recipes": ["numpy_f32_blas"]},
            "quant_matmul": {"recipes": ["ascend_a2"]},
            "moe_dispatch_combine": {"dtypes": ["bf16", "f16"], "recipes": ["ascend_v2"]},
            "mla_decode": {"dtypes": ["bf16", "f16"], "layouts": ["BNSD", "BSND"],
                           "recipes": ["numpy_f32_blas"]},
        }},
        libraries={"numpy": np.__version__, "python": sys.version.split()[0]},
        device="CPU (numpy %s, BLAS)" % np.__version__,
    )

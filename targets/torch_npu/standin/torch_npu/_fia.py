"""npu_fused_infer_attention_score on numpy, from the aclnnFusedInferAttentionScoreV4 page
(hicann/ops-transformer attention/fused_infer_attention_score/docs/aclnnFusedInferAttentionScoreV4.md)
and the torch_npu API page. Independent of conform: nothing here comes from the project.

What it models:
- the layouts BSH, BSND, BNSD, BNSD_BSND (BNSD in, BSND out) and TND (cumulative
  actual_seq_lengths), paged KV through block_table (BnBsH or BnNBsD caches);
- the documented argument checks, raised as the aclnn call's error (product list A2/A3; heads
  and GQA ratio; head_dim <= 512; sparse_mode 0..4 and the 2048x2048 mask of modes 2..4;
  inner_precise 0..3 and 0/1 for decode; block_size per prefill/decode; the BnNBsD cache only
  with BNSD/TND queries; the TND limits);
- softmax(scale * Q K^T masked) V in f32, one rounding of the output to the query dtype;
  softmax_lse = max + log(sum) in f32, +inf for invalid rows (documented);
- rows with no visible key: with the row-invalid correction (inner_precise 2/3, or switched on
  by the kernel itself for sparse_mode 3 with Sq > Skv, both documented) the output is 0 and
  the LSE +inf; without it the page only promises "precision loss", modelled (assumed) as the
  masked scores taking a large finite negative value, so the row averages V;
- query rows past actual_seq_lengths (padding) are not written: the output is allocated
  uninitialised, so they hold NaN here (assumed: the page does not say they are written);
- INT8 paged K/V in decode (Q_S = 1) with key_/value_antiquant_scale and offsets, the page's
  Q_S = 1 antiquant table: mode 0 per-channel ((1, N, 1, D), (1, N, D), (1, H), or (1) per
  tensor; the query's dtype), mode 1 per-token ((1, B, S) float32, S at least the block table
  width times block_size), equal modes or key 0 with value 1 (then an f16 query only), offsets
  both or neither with their scale's shape and dtype, an INT8 block_size a multiple of 32. The
  values are dequantised as (y + offset) * scale in float32 (the incre-flash-attention kernel
  widens int8 and parameters to float32, adds the offset, then multiplies by the scale) before
  the same attention.
- MLA (query_rope and key_rope both given; the aclnnFusedInferAttentionScoreV3 page's rules for
  a query D of 512, outside TND): the ND latent cache paged through block_table as key and
  value, the 64-wide rope keys paged the same way; the scores are one 576-long f32 dot product
  of [q_nope, q_rope] with [c_kv, k_rope] per key, the rest as above (values from the value
  tensor, 512 wide). One rope tensor without the other, a Q_N outside 1, 2, 4, ..., 128, a
  second KV head, block sizes other than 16 and 128, no block table, a sparse mode or mask with
  Q_S 1, rope dtypes or shapes unlike the query's / key's, quantisation, and BNSD_BSND are
  refused as the page says; MTP (Q_S > 1), TND and the NZ cache are refused as not modelled.
"""
import numpy as np

from . import _soc

I32_MAX = 2147483647
LAYOUTS = ("BSH", "BSND", "BNSD", "BNSD_BSND", "TND")
_MASKED_FINITE = np.float32(-3.0e38)  # the "large negative" a masked score takes (assumed)


class AclnnError(RuntimeError):
    pass


def fail(api, why, code="161002 ACLNN_ERR_PARAM_INVALID"):
    raise AclnnError("call %s failed, detail: %s: %s (conform CPU stand-in)" % (api, code, why))


API = "aclnnFusedInferAttentionScoreV4"


def _per_batch(layout, a, heads, batch_hint=None, lengths=None):
    """[B, N, S, D] f32 list per batch (TND: variable S)."""
    if layout == "TND":
        ends = [int(x) for x in lengths]
        starts = [0] + ends[:-1]
        return [a[s:e].transpose(1, 0, 2) for s, e in zip(starts, ends)]
    if layout == "BSH":
        b, s, h = a.shape
        if h % heads:
            fail(API, "H %d is not a multiple of the head count %d" % (h, heads))
        return [a[i].reshape(s, heads, h // heads).transpose(1, 0, 2) for i in range(b)]
    if layout == "BSND":
        return [a[i].transpose(1, 0, 2) for i in range(a.shape[0])]
    return [a[i] for i in range(a.shape[0])]  # BNSD, BNSD_BSND


def _check_mask_compressed(mask, sparse):
    if mask is None:
        fail(API, "sparse_mode %d needs the 2048x2048 atten_mask" % sparse)
    m = np.asarray(mask)
    if m.shape != (2048, 2048) or not np.array_equal(
            m.astype(bool), np.triu(np.ones((2048, 2048), bool), k=1)):
        fail(API, "sparse_mode %d takes the optimised 2048x2048 lower-triangular atten_mask"
             % sparse)


class Antiquant:
    """The key/value antiquant arguments of one call (tensors or None, and the two modes)."""

    def __init__(self, key_scale, key_offset, value_scale, value_offset, key_mode, value_mode):
        self.scale = {"key": key_scale, "value": value_scale}
        self.offset = {"key": key_offset, "value": value_offset}
        self.mode = {"key": int(key_mode), "value": int(value_mode)}

    def given(self):
        return any(t is not None for t in list(self.scale.values()) + list(self.offset.values()))


def _antiquant_params(aq, which, q_dt, kv_heads, d, batch, min_seq):
    """(scale, offset) of `which` as float32 arrays shaped for the dequantisation: mode 0
    (KV_N, D), mode 1 (B, S); the page's shape and dtype rules raised as its errors."""
    mode = aq.mode[which]
    s_t, o_t = aq.scale[which], aq.offset[which]
    if mode == 0:
        if s_t.dtype is not q_dt:
            fail(API, "per-channel %sAntiquantScale must have the query's dtype" % which)
        shape = s_t.shape
        if shape == (1,):
            pass
        elif shape not in ((1, kv_heads, 1, d), (1, kv_heads, d), (1, kv_heads * d)):
            fail(API, "per-channel %sAntiquantScale shape %s: (1, N, 1, D), (1, N, D), (1, H) "
                      "or (1)" % (which, shape))
    else:
        if s_t.dtype.name != "float32":
            fail(API, "per-token %sAntiquantScale must be FLOAT32" % which)
        if len(s_t.shape) != 3 or s_t.shape[:2] != (1, batch) or s_t.shape[2] < min_seq:
            fail(API, "per-token %sAntiquantScale must be (1, B, S) with S at least the block "
                      "table width times blockSize (%d), got %s" % (which, min_seq, s_t.shape))
    if o_t is not None and (o_t.shape != s_t.shape or o_t.dtype is not s_t.dtype):
        fail(API, "%sAntiquantOffset must have its scale's shape and dtype" % which)
    s = s_t._f32()
    o = o_t._f32() if o_t is not None else np.zeros_like(s)
    if mode == 0:
        if s.shape == (1,):
            return (np.full((kv_heads, d), s[0], np.float32),
                    np.full((kv_heads, d), o[0], np.float32))
        return s.reshape(kv_heads, d), o.reshape(kv_heads, d)
    return s.reshape(batch, -1), o.reshape(batch, -1)


def fia(soc, q_t, k_t, v_t, *, antiquant=None, atten_mask=None, actual_seq_lengths=None,
        actual_seq_lengths_kv=None, block_table=None, query_rope=None, key_rope=None,
        num_heads=1, scale=1.0, pre_tokens=I32_MAX, next_tokens=I32_MAX, input_layout="BSH",
        num_key_value_heads=0, sparse_mode=0, inner_precise=0, block_size=0,
        softmax_lse_flag=False):
    """Returns (out f32 array in the output layout, lse f32 array or None, out dtype name)."""
    fam = _soc.family(soc)
    if fam not in ("A2", "A3"):
        fail(API, "product %s is not supported (Atlas A2/A3 only)" % soc,
             code="361001 ACLNN_ERR_RUNTIME_ERROR")
    if input_layout not in LAYOUTS:
        fail(API, "input_layout %s is not supported" % input_layout)
    dt = q_t.dtype.name
    int8_kv = k_t.dtype.name == "int8" and v_t.dtype.name == "int8"
    aq = antiquant if antiquant is not None and antiquant.given() else None
    if dt not in ("float16", "bfloat16") or not (
            int8_kv or (k_t.dtype is q_t.dtype and v_t.dtype is q_t.dtype)):
        fail(API, "query FLOAT16/BFLOAT16 with key and value of its dtype, or both INT8")
    if int8_kv:
        if aq is None or aq.scale["key"] is None or aq.scale["value"] is None:
            fail(API, "INT8 key/value need keyAntiquantScale and valueAntiquantScale")
        if (aq.offset["key"] is None) != (aq.offset["value"] is None):
            fail(API, "keyAntiquantOffset and valueAntiquantOffset are both given or both "
                      "absent")
        km, vm = aq.mode["key"], aq.mode["value"]
        if km not in (0, 1) or vm not in (0, 1):
            fail(API, "key/valueAntiquantMode %d/%d: the stand-in models 0 and 1" % (km, vm))
        if km != vm and not (km == 0 and vm == 1):
            fail(API, "keyAntiquantMode and valueAntiquantMode must match, except key 0 with "
                      "value 1")
        if (km, vm) == (0, 1) and dt != "float16":
            fail(API, "key per-channel with value per-token over INT8 needs a FLOAT16 query")
        if block_table is None:
            fail(API, "stand-in: INT8 key/value are modelled with PagedAttention only")
    elif aq is not None:
        fail(API, "antiquant parameters given for non-INT8 key/value (not modelled)")
    heads = int(num_heads)
    kv_heads = int(num_key_value_heads) or heads
    if not 0 < heads <= 256:
        fail(API, "numHeads %d out of range (1..256)" % heads)
    # The group limit of 64 is the general one; MLA (both rope tensors) takes up to 128 query
    # heads over its one KV head (checked in _check_mla).
    mla_pair = query_rope is not None and key_rope is not None
    if heads % kv_heads or (heads // kv_heads > 64 and not mla_pair):
        fail(API, "numHeads / numKeyValueHeads must be an integer <= 64")
    sparse = int(sparse_mode)
    if sparse not in (0, 1, 2, 3, 4):
        fail(API, "sparseMode %d is not supported" % sparse)
    if sparse == 1:
        fail(API, "sparseMode 1 (allMask) is not modelled by the stand-in")
    ip = int(inner_precise)
    if ip not in (0, 1, 2, 3):
        fail(API, "innerPrecise %d is not supported" % ip)
    q = q_t._f32()
    k_raw, v_raw = k_t._f32(), v_t._f32()
    tnd = input_layout == "TND"
    if tnd:
        if actual_seq_lengths is None or actual_seq_lengths_kv is None:
            fail(API, "TND needs actualSeqLengths and actualSeqLengthsKv")
        if len(actual_seq_lengths) > 4096 or len(actual_seq_lengths_kv) > 4096:
            fail(API, "TND takes at most 4096 sequences")
        d = q.shape[2]
        batch = len(actual_seq_lengths)
    else:
        d = q.shape[2] // heads if input_layout == "BSH" else q.shape[3]
        batch = q.shape[0]
    if d > 512:
        fail(API, "head dim %d exceeds 512" % d)
    qs = _per_batch(input_layout, q, heads, lengths=actual_seq_lengths)
    q_seq = max(x.shape[1] for x in qs) if qs else 0
    decode = (not tnd) and q_seq == 1
    if int8_kv and not decode:
        fail(API, "stand-in: the prefill (Q_S > 1) antiquant path is not modelled")
    if decode and ip not in (0, 1):
        fail(API, "innerPrecise %d: the decode (Q_S = 1) path supports only 0 and 1" % ip)
    paged = block_table is not None
    mla = query_rope is not None or key_rope is not None
    if mla:
        if query_rope is None or key_rope is None:
            fail(API, "%s is null, but %s exists: queryRope and keyRope are given together or "
                      "not at all" % (("queryRope", "keyRope") if query_rope is None
                                      else ("keyRope", "queryRope")))
        if query_rope.dtype is not q_t.dtype or key_rope.dtype is not k_t.dtype:
            fail(API, "queryRope must have the query's dtype and keyRope the key's")
    if tnd:
        _check_tnd(dt, d, heads, kv_heads, sparse, atten_mask, paged, query_rope, key_rope,
                   actual_seq_lengths, actual_seq_lengths_kv)
    elif mla:
        _check_mla(q_t, k_t, v_t, query_rope, key_rope, d, heads, kv_heads, q_seq, input_layout,
                   sparse, atten_mask, paged, block_size, actual_seq_lengths, int8_kv or aq)
    # Keys and values per batch: [KVN, L, D].
    if paged:
        bs = int(block_size)
        if decode:
            if not (0 < bs <= 512 and bs % 16 == 0):
                fail(API, "blockSize %d: decode needs a multiple of 16 in 16..512" % bs)
            if int8_kv and bs % 32:
                fail(API, "blockSize %d: an INT8 cache needs a multiple of 32" % bs)
        elif not (128 <= bs <= 512 and bs % 128 == 0):
            fail(API, "blockSize %d: prefill needs a multiple of 128 in 128..512" % bs)
        if actual_seq_lengths_kv is None:
            fail(API, "PagedAttention needs actualSeqLengthsKv")
        bt = block_table._a
        if bt.dtype != np.int32 or bt.ndim != 2 or bt.shape[0] != batch:
            fail(API, "blockTable must be INT32 [B, maxBlockNumPerSeq]")
        if k_raw.ndim == 3:  # BnBsH
            if k_raw.shape[1] != bs or k_raw.shape[2] != kv_heads * d:
                fail(API, "key cache (blocknum, blocksize, H) does not match blockSize/H")
            kc = k_raw.reshape(k_raw.shape[0], bs, kv_heads, d).transpose(0, 2, 1, 3)
            vc = v_raw.reshape(v_raw.shape[0], bs, kv_heads, d).transpose(0, 2, 1, 3)
        elif k_raw.ndim == 4:  # BnNBsD
            if input_layout not in ("BNSD", "TND"):
                fail(API, "a (blocknum, KV_N, blocksize, D) cache needs a BNSD or TND query, "
                          "not %s" % input_layout)
            if k_raw.shape[2] != bs or k_raw.shape[1] != kv_heads:
                fail(API, "key cache (blocknum, KV_N, blocksize, D) does not match")
            kc, vc = k_raw, v_raw
        else:
            fail(API, "the key cache must be 3-D (BnBsH) or 4-D (BnNBsD)")
        ks, vs = [], []
        for b in range(batch):
            n = int(actual_seq_lengths_kv[b])
            blocks = -(-n // bs)
            if blocks > bt.shape[1]:
                fail(API, "blockTable has too few blocks for actualSeqLengthsKv")
            ids = bt[b, :blocks]  # not validated by the kernel (documented)
            ks.append(np.concatenate([kc[i] for i in ids], axis=1)[:, :n] if blocks
                      else kc[:0, :, :0].reshape(kv_heads, 0, d))
            vs.append(np.concatenate([vc[i] for i in ids], axis=1)[:, :n] if blocks
                      else vc[:0, :, :0].reshape(kv_heads, 0, d))
        if int8_kv:
            min_seq = bt.shape[1] * bs
            for which, lst in (("key", ks), ("value", vs)):
                sc, of = _antiquant_params(aq, which, q_t.dtype, kv_heads, d, batch, min_seq)
                for b in range(batch):
                    y = lst[b]  # [KV_N, L, D]: int8 values, exact in float32
                    n = y.shape[1]
                    if aq.mode[which] == 0:
                        lst[b] = ((y + of[:, None, :]).astype(np.float32)
                                  * sc[:, None, :]).astype(np.float32)
                    else:
                        lst[b] = ((y + of[b, None, :n, None]).astype(np.float32)
                                  * sc[b, None, :n, None]).astype(np.float32)
        if mla:
            # The 64-wide rope keys, paged like the latent cache, join the keys (and the rope
            # queries the queries): the scores are one 576-long dot product per key.
            kr = key_rope._f32()
            if kr.ndim == 3:
                kr = kr.reshape(kr.shape[0], bs, 1, -1).transpose(0, 2, 1, 3)
            qr = _per_batch(input_layout, query_rope._f32(), heads)
            for b in range(batch):
                n = int(actual_seq_lengths_kv[b])
                ids = bt[b, :-(-n // bs)]
                kr_b = (np.concatenate([kr[i] for i in ids], axis=1)[:, :n] if n
                        else np.zeros((1, 0, kr.shape[-1]), np.float32))
                ks[b] = np.concatenate([ks[b], kr_b], axis=-1)
                qs[b] = np.concatenate([qs[b], qr[b]], axis=-1)
    else:
        ks = _per_batch(input_layout, k_raw, kv_heads, lengths=actual_seq_lengths_kv)
        vs = _per_batch(input_layout, v_raw, kv_heads, lengths=actual_seq_lengths_kv)
    # Masks.
    explicit = None
    if sparse in (2, 3, 4):
        _check_mask_compressed(None if atten_mask is None else atten_mask._a, sparse)
    elif atten_mask is not None:
        explicit = atten_mask._a.astype(bool)
    outs, lses = [], []
    group = heads // kv_heads
    for b in range(batch):
        qb, kb, vb = qs[b], ks[b], vs[b]
        sq, skv = qb.shape[1], kb.shape[1]
        lq = sq if tnd or actual_seq_lengths is None else min(int(actual_seq_lengths[b]), sq)
        lk = skv if tnd or paged or actual_seq_lengths_kv is None \
            else min(int(actual_seq_lengths_kv[b]), skv)
        i = np.arange(sq)[:, None]
        j = np.arange(skv)[None, :]
        shift = lk - lq
        ok = np.broadcast_to(j < lk, (sq, skv)).copy()
        if sparse == 2:
            ok &= j <= i
        elif sparse == 3:
            ok &= j <= i + shift
        elif sparse == 4:
            ok &= (j >= i + shift - int(pre_tokens)) & (j <= i + shift + int(next_tokens))
        if explicit is not None:
            m = explicit
            m = m[b, 0] if m.ndim == 4 else (m[b] if m.ndim == 3 else m)
            ok &= ~m[:sq, :skv]
        written = np.arange(sq) < lq
        correction = ip in (2, 3) or (sparse == 3 and lq > lk)
        o = np.full((heads, sq, d), np.nan, np.float32)  # uninitialised: poison
        lse = np.full((heads, sq), np.nan, np.float32)
        for h in range(heads):
            kh = h // group
            s = (qb[h] @ kb[kh].T).astype(np.float32) * np.float32(scale)
            for r in range(sq):
                if not written[r]:
                    continue
                row_ok = ok[r]
                if not row_ok.any():
                    if correction or lk == 0:
                        o[h, r] = 0.0
                        lse[h, r] = np.inf
                        continue
                    sr = np.full(skv, _MASKED_FINITE, np.float32)[:lk]
                    vv = vb[kh][:lk]
                else:
                    sr = s[r][row_ok]
                    vv = vb[kh][row_ok]
                mx = np.max(sr)
                p = np.exp((sr - mx).astype(np.float32)).astype(np.float32)
                den = np.float32(p.sum(dtype=np.float32))
                o[h, r] = ((p @ vv).astype(np.float32) / den).astype(np.float32)
                lse[h, r] = np.float32(mx + np.log(den))
        outs.append(o)
        lses.append(lse)
    # Back to the output layout.
    if tnd:
        out = np.concatenate([o.transpose(1, 0, 2) for o in outs], axis=0)
        lse = np.concatenate([x.transpose(1, 0) for x in lses], axis=0)[..., None]
    else:
        o = np.stack(outs)  # [B, N, S, D]
        if input_layout == "BSH":
            out = o.transpose(0, 2, 1, 3).reshape(batch, q_seq, heads * d)
        elif input_layout in ("BSND", "BNSD_BSND"):
            out = o.transpose(0, 2, 1, 3)
        else:
            out = o
        lse = np.stack(lses)[..., None]  # [B, N, S, 1]
    return np.ascontiguousarray(out), (lse if softmax_lse_flag else None), dt


MLA_HEADS = (1, 2, 4, 8, 16, 32, 64, 128)
MLA_LAYOUTS = ("BSH", "BSND", "BNSD")  # the page's others (*_NBSD, TND, TND_NTD): not modelled


def _check_mla(q_t, k_t, v_t, q_rope, k_rope, d, heads, kv_heads, q_seq, layout, sparse,
               atten_mask, paged, block_size, actual_seq_lengths, quantised):
    """The MLA rules of the aclnnFusedInferAttentionScoreV3 page (queryRope and keyRope given),
    Atlas A2, outside TND: query D 512 (128 takes TND / NTD_TND only); rope D 64, each rope
    tensor shaped as its query / key otherwise; Q_N 1, 2, 4, ..., 128; one KV head of D 512;
    Q_S 1..16, Q_S 1 with sparse mode 0 and no mask; PagedAttention on with blockSize 16 or
    128; no actualSeqLengths (TND only); no pseudo- or full quantisation. Modelled: decode
    (Q_S = 1) with the ND caches; MTP (Q_S > 1, sparse mode 3 and its mask) and the NZ cache
    are refused as not modelled."""
    if d == 128:
        fail(API, "with queryRope/keyRope, a query D of 128 takes inputLayout TND or NTD_TND")
    if d != 512:
        fail(API, "with queryRope/keyRope, the query D must be 512 (or 128 in TND), not %d" % d)
    if layout not in MLA_LAYOUTS:
        fail(API, "input_layout %s with queryRope/keyRope is not modelled by the stand-in "
                  "(BSH, BSND, BNSD)" % layout)
    q_shape, r_shape = tuple(q_t.shape), tuple(q_rope.shape)
    want = q_shape[:-1] + ((q_shape[-1] // 512 * 64,) if layout == "BSH" else (64,))
    if r_shape != want:
        fail(API, "queryRope shape %s: the query's %s with D 64" % (r_shape, q_shape))
    if heads not in MLA_HEADS:
        fail(API, "numHeads %d with queryRope (query D 512): 1, 2, 4, 8, 16, 32, 64 or 128"
             % heads)
    if kv_heads != 1:
        fail(API, "numKeyValueHeads %d with queryRope (query D 512): the key has one head"
             % kv_heads)
    if not 1 <= q_seq <= 16:
        fail(API, "Q_S %d with queryRope (query D 512): 1 to 16" % q_seq)
    if q_seq == 1 and (sparse != 0 or atten_mask is not None):
        fail(API, "with queryRope and Q_S 1 only sparseMode 0 without a mask is supported")
    if q_seq > 1:
        fail(API, "stand-in: MLA with Q_S > 1 (sparseMode 3 and its mask) is not modelled")
    if quantised:
        fail(API, "queryRope/keyRope do not support pseudo- or full quantisation")
    if actual_seq_lengths is not None:
        fail(API, "with queryRope, actualSeqLengths is supported only in TND with Q_S > 1")
    if not paged:
        fail(API, "with queryRope (query D 512), PagedAttention must be enabled (blockTable)")
    if int(block_size) not in (16, 128):
        fail(API, "blockSize %d with queryRope (query D 512): 16 or 128" % int(block_size))
    k_shape, v_shape, kr_shape = tuple(k_t.shape), tuple(v_t.shape), tuple(k_rope.shape)
    if len(k_shape) == 5:
        fail(API, "stand-in: the NZ cache [blockNum, N, D/16, blockSize, 16] is not modelled")
    if k_shape[-1] != 512:
        fail(API, "with queryRope (query D 512), the key D must be 512, not %d" % k_shape[-1])
    if v_shape != k_shape:
        fail(API, "key and value shapes must be identical: %s and %s" % (k_shape, v_shape))
    if kr_shape != k_shape[:-1] + (64,):
        fail(API, "keyRope shape %s: the key's %s with D 64" % (kr_shape, k_shape))


def _check_tnd(dt, d, heads, kv_heads, sparse, atten_mask, paged, query_rope, key_rope,
               lens_q, lens_kv):
    """The combined TND / TND_NTD / NTD_TND limits of the V4 page, Atlas A2/A3."""
    if sparse == 0 and atten_mask is not None:
        fail(API, "TND: sparseMode 0 takes no atten_mask")
    if sparse not in (0, 3):
        fail(API, "TND supports sparseMode 0 (no mask) or 3 (with the mask), not %d" % sparse)
    rope = query_rope is not None or key_rope is not None
    if d == 512:
        if not (rope and paged and kv_heads == 1):
            fail(API, "TND with head dim 512 needs query_rope/key_rope (MLA), PagedAttention "
                      "and numKeyValueHeads 1")
        fail(API, "TND with head dim 512 (MLA) is not modelled by the stand-in")
    if dt != "bfloat16":
        fail(API, "TND with head dim %d supports BFLOAT16 only" % d)
    if rope:
        fail(API, "query_rope/key_rope (MLA) are not modelled by the stand-in")
    if d not in (128, 192):
        fail(API, "TND needs head dim 128 or 192 (512 only with query_rope/key_rope), not %d" % d)
    if d == 192 and (heads != kv_heads or paged):
        fail(API, "TND with V head dim 192 is not supported with GQA or PagedAttention")
    if sparse == 3:
        ends_q = [int(x) for x in lens_q]
        ends_k = [int(x) for x in lens_kv]
        lq = [e - s for s, e in zip([0] + ends_q[:-1], ends_q)]
        lk = [e - s for s, e in zip([0] + ends_k[:-1], ends_k)]
        if any(a >= b for a, b in zip(lq, lk)):
            fail(API, "TND with sparseMode 3 needs each batch's actualSeqLengths below its "
                      "actualSeqLengthsKv")

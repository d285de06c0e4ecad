"""Attention plumbing shared by the CPU workers (numpy only): parameters as the suites name
them (torch_npu's names), layouts to and from BNSD, per-batch lengths, the mask predicate,
and the paged-KV gather through the block table.

Conventions (the reference's, docs/numerics.md): sparse_mode 0 none, 2 top-left
causal (j <= i), 3 bottom-right causal (j <= i + Lk - Lq), 4 band relative to the
bottom-right diagonal (i + Lk - Lq - pre_tokens <= j <= i + Lk - Lq + next_tokens); explicit
`atten_mask` U8 [B, q_seq, kv_seq], 1 = masked; keys at or beyond the KV length never count;
a row with no allowed key outputs 0 with LSE +inf; padded query rows output 0 with LSE +inf;
LSE = max(scaled scores) + ln(sum exp) (natural log), F32.
"""

import math

import numpy as np

# Suite parameter names -> what they mean here (one table, so alignment is easy).
PARAMS = {
    "dtype": "bf16 | f16 | f32",
    "input_layout": "BSND | BNSD | BSH | TND | BNSD_BSND",
    "batch": "B",
    "q_seq": "padded query length S (not TND)",
    "kv_seq": "padded KV length (fa_prefill, not TND)",
    "num_heads": "N",
    "num_key_value_heads": "KV heads (0 = N)",
    "head_dim": "D",
    "scale": "softmax scale (default 1/sqrt(D))",
    "sparse_mode": "0 | 2 | 3 | 4",
    "pre_tokens": "band, sparse_mode 4",
    "next_tokens": "band, sparse_mode 4",
    "atten_mask": "bool: explicit mask input `atten_mask`",
    "actual_seq_lengths": "per-batch query lengths (cumulative for TND)",
    "actual_seq_lengths_kv": "per-batch KV lengths (cumulative for TND)",
    "softmax_lse_flag": "bool: output `softmax_lse`",
    "block_size": "pa_decode: slots per block",
    "cache_layout": "pa_decode: BnBsH | BnNBsD",
}
# Tensor names of the attention ops.
INPUTS = {"query": "query", "key": "key", "value": "value", "mask": "atten_mask",
          "key_cache": "key_cache", "value_cache": "value_cache", "block_table": "block_table"}
OUTPUTS = {"out": "attention_out", "lse": "softmax_lse"}
# Parameters accepted but irrelevant to the math (tiling hints for the reference).
IGNORED = {"q_tile", "kv_tile", "mask_keep", "masked_rows", "num_blocks", "max_blocks",
           "shared_prefix_blocks"}

I32_MAX = 2147483647


class Geometry:
    """Sizes and per-batch lengths of an attention case."""

    def __init__(self, params, kv_seq=None):
        p = params
        self.layout = p.get("input_layout", "BSND")
        self.batch = int(p["batch"])
        self.heads = int(p["num_heads"])
        kvh = int(p.get("num_key_value_heads", 0) or 0)
        self.kv_heads = kvh if kvh else self.heads
        if self.heads % self.kv_heads:
            raise ValueError("num_heads %d not a multiple of num_key_value_heads %d"
                             % (self.heads, self.kv_heads))
        self.group = self.heads // self.kv_heads
        self.head_dim = int(p["head_dim"])
        s = p.get("scale")
        self.scale = float(s) if s is not None else 1.0 / math.sqrt(self.head_dim)
        self.sparse_mode = int(p.get("sparse_mode", 0))
        pre = p.get("pre_tokens")
        nxt = p.get("next_tokens")
        self.pre_tokens = I32_MAX if pre is None else int(pre)
        self.next_tokens = I32_MAX if nxt is None else int(nxt)
        self.lse_flag = bool(p.get("softmax_lse_flag", False))
        self.varlen = self.layout == "TND"
        aq = p.get("actual_seq_lengths")
        ak = p.get("actual_seq_lengths_kv")
        if self.varlen:
            self.q_start, self.lq = _cumulative(aq, self.batch, "actual_seq_lengths")
            self.k_start, self.lk = _cumulative(ak if ak is not None else aq, self.batch,
                                                "actual_seq_lengths_kv")
            self.q_seq = max(self.lq) if self.lq else 0
            self.kv_seq = max(self.lk) if self.lk else 0
        else:
            self.q_seq = int(p.get("q_seq", 1) or 1)
            self.kv_seq = int(kv_seq if kv_seq is not None else p.get("kv_seq", 0))
            self.lq = [int(x) for x in aq] if aq is not None else [self.q_seq] * self.batch
            self.lk = [int(x) for x in ak] if ak is not None else [self.kv_seq] * self.batch

    def allowed(self, b, mask=None):
        """Boolean [q_seq, kv_seq] of keys row i of batch b may attend to (rows >= lq all
        False)."""
        lq, lk = self.lq[b], self.lk[b]
        i = np.arange(self.q_seq)[:, None]
        j = np.arange(self.kv_seq)[None, :]
        shift = lk - lq
        ok = np.broadcast_to(j < lk, (self.q_seq, self.kv_seq)).copy()
        if self.sparse_mode == 2:
            ok &= j <= i
        elif self.sparse_mode == 3:
            ok &= j <= i + shift
        elif self.sparse_mode == 4:
            ok &= (j >= i + shift - self.pre_tokens) & (j <= i + shift + self.next_tokens)
        elif self.sparse_mode != 0:
            raise ValueError("sparse_mode %d is not supported" % self.sparse_mode)
        ok &= i < lq
        if mask is not None:
            ok &= np.asarray(mask[b][: self.q_seq, : self.kv_seq]) == 0
        return ok


def _cumulative(v, batch, name):
    if v is None or len(v) != batch:
        raise ValueError("TND needs %s with one cumulative length per batch" % name)
    ends = [int(x) for x in v]
    starts = [0] + ends[:-1]
    return starts, [e - s for s, e in zip(starts, ends)]


def to_bnsd(x, layout, heads, head_dim):
    """[B,S,N,D] / [B,N,S,D] / [B,S,N*D] -> [B,N,S,D] (a view where possible)."""
    if layout == "BSND":
        return x.transpose(0, 2, 1, 3)
    if layout in ("BNSD", "BNSD_BSND"):
        return x
    if layout == "BSH":
        b, s, _ = x.shape
        return x.reshape(b, s, heads, head_dim).transpose(0, 2, 1, 3)
    raise ValueError("layout %s has no BNSD view" % layout)


def from_bnsd(x, layout):
    """[B,N,S,D] -> the output layout of `layout` (BNSD_BSND outputs BSND)."""
    if layout in ("BSND", "BNSD_BSND"):
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3))
    if layout == "BNSD":
        return np.ascontiguousarray(x)
    if layout == "BSH":
        b, n, s, d = x.shape
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3).reshape(b, s, n * d))
    raise ValueError("layout %s" % layout)


def tnd_to_padded(x, starts, lens, seq):
    """[T,N,D] -> [B,N,seq,D] zero-padded."""
    t, n, d = x.shape
    out = np.zeros((len(lens), n, seq, d), dtype=x.dtype)
    for b, (s, l) in enumerate(zip(starts, lens)):
        out[b, :, :l] = x[s:s + l].transpose(1, 0, 2)
    return out


def padded_to_tnd(x, starts, lens, total):
    """[B,N,seq,D] -> [T,N,D]."""
    _, n, _, d = x.shape
    out = np.zeros((total, n, d), dtype=x.dtype)
    for b, (s, l) in enumerate(zip(starts, lens)):
        out[s:s + l] = x[b, :, :l].transpose(1, 0, 2)
    return out


def lse_to_layout(lse_bnsq, g):
    """[B,N,S] f32 -> [B,N,S,1] or [T,N,1] (TND)."""
    if g.varlen:
        total = g.q_start[-1] + g.lq[-1] if g.lq else 0
        out = np.zeros((total, g.heads, 1), dtype=np.float32)
        for b, (s, l) in enumerate(zip(g.q_start, g.lq)):
            out[s:s + l, :, 0] = lse_bnsq[b, :, :l].T
        return out
    return np.ascontiguousarray(lse_bnsq[..., None], dtype=np.float32)


def gather_paged(cache, block_table, lk, block_size, cache_layout, kv_heads, head_dim, seq):
    """Gathers a paged cache into contiguous [B, KV_N, seq, D] through the block table.
    Only slots of valid tokens are read; the rest is 0 (and masked by the KV length)."""
    batch = block_table.shape[0]
    out = np.zeros((batch, kv_heads, seq, head_dim), dtype=cache.dtype)
    for b in range(batch):
        n = int(lk[b])
        t = np.arange(n)
        blocks = block_table[b, t // block_size].astype(np.int64)
        slots = t % block_size
        if cache_layout == "BnBsH":
            rows = cache[blocks, slots].reshape(n, kv_heads, head_dim)
            out[b, :, :n] = rows.transpose(1, 0, 2)
        elif cache_layout == "BnNBsD":
            out[b, :, :n] = cache[blocks, :, slots].transpose(1, 0, 2)
        else:
            raise ValueError("cache_layout %s" % cache_layout)
    return out


def inputs_bnsd(case, g, dtype_of):
    """query, key, value as [B,N,S,D] arrays of the op's storage (BF16 as bits), gathering
    paged KV for pa_decode. `dtype_of(name)` is the safetensors dtype of an input."""
    q = case.inputs[INPUTS["query"]]
    if case.op == "pa_decode":
        bs = int(case.params.get("block_size", 128))
        bt = case.inputs[INPUTS["block_table"]]
        seq = bt.shape[1] * bs
        g.kv_seq = seq
        if case.params.get("actual_seq_lengths_kv") is not None:
            g.lk = [int(x) for x in case.params["actual_seq_lengths_kv"]]
        layout = case.params.get("cache_layout", "BnBsH")
        k = gather_paged(case.inputs[INPUTS["key_cache"]], bt, g.lk, bs, layout,
                         g.kv_heads, g.head_dim, seq)
        v = gather_paged(case.inputs[INPUTS["value_cache"]], bt, g.lk, bs, layout,
                         g.kv_heads, g.head_dim, seq)
        return to_bnsd(q, g.layout, g.heads, g.head_dim), k, v
    k = case.inputs[INPUTS["key"]]
    v = case.inputs[INPUTS["value"]]
    if g.varlen:
        return (tnd_to_padded(q, g.q_start, g.lq, g.q_seq),
                tnd_to_padded(k, g.k_start, g.lk, g.kv_seq),
                tnd_to_padded(v, g.k_start, g.lk, g.kv_seq))
    return (to_bnsd(q, g.layout, g.heads, g.head_dim),
            to_bnsd(k, g.layout, g.kv_heads, g.head_dim),
            to_bnsd(v, g.layout, g.kv_heads, g.head_dim))


def output_from_bnsd(out, g):
    """[B,N,S,D] -> the op's output layout."""
    if g.varlen:
        total = g.q_start[-1] + g.lq[-1] if g.lq else 0
        return padded_to_tnd(out, g.q_start, g.lq, total)
    return from_bnsd(out, g.layout)

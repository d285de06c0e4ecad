"""onnxruntime worker: attention through com.microsoft contrib ops on the CPU provider.

- fa_prefill / pa_decode (general): MultiHeadAttention, with the mask (sparse mode, lengths,
  explicit mask) as an additive attention_bias of -inf; GQA cases repeat the KV heads first
  (MultiHeadAttention has one head count); rows with no allowed key are set to 0 after.
- pa_decode with one query row and no explicit mask: GroupQueryAttention with a KV cache
  (past_key/past_value = the first L-1 tokens, the new key/value = token L-1, seqlens_k).
- PA cases gather KV through the block table first (said in the notes of each result).
- f32 and f16 only (ORT has no bf16 GQA/MHA on CPU) and no FP4 kernels; no softmax_lse.
"""
import sys

import conform_worker as cw

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    import conform_attention as ca
except Exception as e:
    cw.unavailable("import failed: %s" % e)

ONNX_T = {"F32": TensorProto.FLOAT, "F16": TensorProto.FLOAT16}
NP_T = {"F32": np.float32, "F16": np.float16}
_SESSIONS = {}


def _session(key, build):
    s = _SESSIONS.get(key)
    if s is None:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 2
        opts.log_severity_level = 3
        s = ort.InferenceSession(build().SerializeToString(), opts,
                                 providers=["CPUExecutionProvider"])
        _SESSIONS[key] = s
    return s


def _model(node, inputs, outputs):
    graph = helper.make_graph([node], "attn", inputs, outputs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


def mha(q, k, v, bias, heads, scale, dt):
    """q [B,S,N*D], k/v [B,L,N*D], bias [B,1,S,L] -> [B,S,N*D]."""
    t = ONNX_T[dt]

    def build():
        node = helper.make_node("MultiHeadAttention", ["q", "k", "v", "", "", "bias"], ["o"],
                                domain="com.microsoft", num_heads=heads, scale=scale)
        ins = [helper.make_tensor_value_info(n, t, list(a.shape))
               for n, a in (("q", q), ("k", k), ("v", v), ("bias", bias))]
        return _model(node, ins, [helper.make_tensor_value_info("o", t, None)])

    key = ("mha", dt, q.shape, k.shape, bias.shape, heads, scale)
    return _session(key, build).run(None, {"q": q, "k": k, "v": v, "bias": bias})[0]


def gqa_decode(q, k_new, v_new, past_k, past_v, seqlens_k, total, heads, kv_heads, scale, dt):
    t = ONNX_T[dt]

    def build():
        node = helper.make_node(
            "GroupQueryAttention",
            ["q", "k", "v", "past_k", "past_v", "seqlens_k", "total"],
            ["o", "present_k", "present_v"], domain="com.microsoft",
            num_heads=heads, kv_num_heads=kv_heads, scale=scale)
        ins = [helper.make_tensor_value_info(n, t, list(a.shape)) for n, a in
               (("q", q), ("k", k_new), ("v", v_new), ("past_k", past_k), ("past_v", past_v))]
        ins += [helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [q.shape[0]]),
                helper.make_tensor_value_info("total", TensorProto.INT32, [1])]
        outs = [helper.make_tensor_value_info(n, t, None) for n in ("o", "present_k", "present_v")]
        return _model(node, ins, outs)

    key = ("gqa", dt, q.shape, past_k.shape, heads, kv_heads, scale)
    feeds = {"q": q, "k": k_new, "v": v_new, "past_k": past_k, "past_v": past_v,
             "seqlens_k": seqlens_k, "total": np.array([total], dtype=np.int32)}
    return _session(key, build).run(None, feeds)[0]


def to_bsh(x_bnsd):
    b, n, s, d = x_bnsd.shape
    return np.ascontiguousarray(x_bnsd.transpose(0, 2, 1, 3).reshape(b, s, n * d))


def attention(case):
    g = ca.Geometry(case.params)
    dt = case.input_dtypes[ca.INPUTS["query"]]
    if dt not in NP_T:
        raise cw.Unsupported("onnxruntime CPU has no %s attention" % dt)
    if g.lse_flag:
        raise cw.Unsupported("MultiHeadAttention/GroupQueryAttention do not return softmax_lse")
    q, k, v = ca.inputs_bnsd(case, g, case.input_dtypes.get)
    mask = case.inputs.get(ca.INPUTS["mask"]) if case.params.get("atten_mask") else None
    ok = np.stack([g.allowed(b, mask) for b in range(g.batch)])  # [B,S,L]
    rows = ok.any(axis=2)  # [B,S]
    np_t = NP_T[dt]
    use_gqa = (case.op == "pa_decode" and g.q_seq == 1 and mask is None
               and g.sparse_mode in (0, 3) and min(g.lk) >= 1)
    if use_gqa:
        lmax = max(g.lk)
        past = max(lmax - 1, 1)
        pk = np.zeros((g.batch, g.kv_heads, past, g.head_dim), dtype=np_t)
        pv = np.zeros_like(pk)
        kn = np.zeros((g.batch, 1, g.kv_heads * g.head_dim), dtype=np_t)
        vn = np.zeros_like(kn)
        for b, l in enumerate(g.lk):
            pk[b, :, : l - 1] = k[b, :, : l - 1]
            pv[b, :, : l - 1] = v[b, :, : l - 1]
            kn[b, 0] = k[b, :, l - 1].reshape(-1)
            vn[b, 0] = v[b, :, l - 1].reshape(-1)
        seqlens = np.array([l - 1 for l in g.lk], dtype=np.int32)
        o = gqa_decode(to_bsh(q), kn, vn, pk, pv, seqlens, lmax, g.heads, g.kv_heads,
                       g.scale, dt)
        case.note("GroupQueryAttention with KV cache (past = first L-1 tokens)")
    else:
        if g.group > 1:
            k = np.repeat(k, g.group, axis=1)
            v = np.repeat(v, g.group, axis=1)
            case.note("MultiHeadAttention with KV heads repeated %dx" % g.group)
        else:
            case.note("MultiHeadAttention")
        bias = np.where(ok, 0, -np.inf).astype(np_t)[:, None]
        o = mha(to_bsh(q), to_bsh(k), to_bsh(v), bias, g.heads, g.scale, dt)
    o = o.reshape(g.batch, g.q_seq, g.heads, g.head_dim).transpose(0, 2, 1, 3)
    o = np.where(rows[:, None, :, None], o, 0).astype(np_t)
    if case.op == "pa_decode":
        case.note("PA: KV gathered through the block table first")
    return {ca.OUTPUTS["out"]: ca.output_from_bnsd(o, g)}


CAPS = {"dtypes": ["f32", "f16"], "layouts": ["BSND", "BNSD", "BSH", "TND", "BNSD_BSND"],
        "limits": {"sparse_mode": {"one_of": [0, 2, 3, 4]},
                   "softmax_lse_flag": {"one_of": [False]}},
        "recipes": ["ort_cpu_contrib"],
        "notes": "no bf16 (no bf16 GQA/MHA on the CPU provider), no FP4, no softmax_lse"}
if __name__ == "__main__":
    cw.serve(
        name="onnxruntime",
        version="1",
        ops={"fa_prefill": attention, "pa_decode": attention},
        capabilities={"ops": {
            "fa_prefill": CAPS,
            "pa_decode": dict(CAPS, notes=CAPS["notes"] + "; PA runs by gathering KV through the "
                              "block table first"),
        }},
        libraries={"onnxruntime": ort.__version__, "onnx": onnx.__version__,
                   "numpy": np.__version__, "python": sys.version.split()[0]},
        device="CPU (onnxruntime %s, CPUExecutionProvider)" % ort.__version__,
    )

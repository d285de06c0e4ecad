"""torch worker (CPU or CUDA): attention through torch.nn.functional.scaled_dot_product_attention
(the flash backend on CUDA where the case allows it: no explicit mask, no lengths, sparse mode 0
or top-left causal 2; otherwise the backend torch picks with a boolean mask), PA via gathering
KV through the block table first, FP4 E2M1 decode through torch.float4_e2m1fn_x2 where present.
Unavailable cleanly where torch is absent. Timings: CUDA events on CUDA, wall time on CPU."""
import os
import sys

import conform_worker as cw

try:
    import numpy as np
    import torch
    import torch.nn.functional as F

    import conform_attention as ca
    import conform_fp4 as f4
except Exception as e:
    cw.unavailable("import failed: %s: %s" % (type(e).__name__, e))

DEVICE = os.environ.get("CONFORM_TORCH_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
TORCH_DT = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def to_torch(arr, dtype):
    a = np.ascontiguousarray(arr)
    if dtype == "BF16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).to(DEVICE)
    return torch.from_numpy(a).to(DEVICE)


def to_numpy(t, dtype):
    t = t.detach().cpu().contiguous()
    if dtype == "BF16":
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def sync():
    if DEVICE.startswith("cuda"):
        torch.cuda.synchronize()


def cuda_timer(fn):
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3


def attention(case):
    g = ca.Geometry(case.params)
    if g.lse_flag:
        raise cw.Unsupported("scaled_dot_product_attention does not return softmax_lse")
    dt = case.input_dtypes[ca.INPUTS["query"]]
    q, k, v = ca.inputs_bnsd(case, g, case.input_dtypes.get)
    q, k, v = (to_torch(x, dt) for x in (q, k, v))
    mask = case.inputs.get(ca.INPUTS["mask"]) if case.params.get("atten_mask") else None
    ok_np = np.stack([g.allowed(b, mask) for b in range(g.batch)])
    rows = torch.from_numpy(ok_np.any(axis=2)).to(DEVICE)
    full = (mask is None and all(l == g.q_seq for l in g.lq) and all(l == g.kv_seq for l in g.lk)
            and g.sparse_mode in (0, 2))
    gqa = g.group > 1
    if full:
        causal = g.sparse_mode == 2
        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=g.scale,
                                                    enable_gqa=gqa)
        if DEVICE.startswith("cuda") and dt in ("F16", "BF16"):
            from torch.nn.attention import SDPBackend, sdpa_kernel
            inner = fn

            def fn():
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    return inner()
            case.note("SDPA flash backend")
        else:
            case.note("SDPA (backend chosen by torch)")
    else:
        m = torch.from_numpy(ok_np[:, None]).to(DEVICE)
        fn = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=g.scale,
                                                    enable_gqa=gqa)
        case.note("SDPA with a boolean mask (backend chosen by torch)")
    timer = cuda_timer if DEVICE.startswith("cuda") else None
    o = case.time(fn, sync=sync, timer=timer)
    o = torch.where(rows[:, None, :, None], o, torch.zeros((), dtype=o.dtype, device=o.device))
    if case.op == "pa_decode":
        case.note("PA: KV gathered through the block table first")
    return {ca.OUTPUTS["out"]: ca.output_from_bnsd(to_numpy(o, dt), g)}


def mxfp4(case):
    t = f4.TENSORS["mxfp4_dequant"]
    if case.params.get("packing", "low_first") != "low_first":
        raise cw.Unsupported("float4_e2m1fn_x2 is low nibble first")
    packed = torch.from_numpy(np.ascontiguousarray(case.inputs[t["codes"]])).to(DEVICE)
    q = packed.view(torch.float4_e2m1fn_x2).to(torch.float32)
    s = torch.from_numpy(f4.group_scale(f4.e8m0_to_f32(case.inputs[t["scale"]]),
                                        q.shape[-1], 32)).to(DEVICE)
    out_dt = case.output_dtypes[t["out"]]
    y = (q * s).to(TORCH_DT[out_dt])
    case.note("FP4 decoded by torch.float4_e2m1fn_x2, f32 product, one rounding")
    return {t["out"]: to_numpy(y, out_dt)}


def fp4_unsupported():
    """Why FP4 cannot run with this torch (None when it can), found at the handshake."""
    if not hasattr(torch, "float4_e2m1fn_x2"):
        return "torch %s has no float4_e2m1fn_x2 dtype" % torch.__version__
    try:
        torch.zeros(2, dtype=torch.uint8).view(torch.float4_e2m1fn_x2).to(torch.float32)
        return None
    except Exception as e:
        return "torch %s cannot decode float4_e2m1fn_x2: %s" % (torch.__version__, e)


if __name__ == "__main__":
    attn = {"dtypes": ["f32", "f16", "bf16"], "layouts": ["BSND", "BNSD", "BSH", "TND", "BNSD_BSND"],
            "limits": {"softmax_lse_flag": {"one_of": [False]}}, "recipes": ["torch_sdpa"]}
    ops = {"fa_prefill": attention, "pa_decode": attention}
    caps = {"fa_prefill": attn,
            "pa_decode": dict(attn, notes="PA runs by gathering KV through the block table first")}
    # FP4 is declared either way; without it every FP4 case is skipped with the reason.
    ops["mxfp4_dequant"] = mxfp4
    caps["mxfp4_dequant"] = {"dtypes": ["bf16", "f16", "f32"], "recipes": ["mx_ocp"]}
    why = fp4_unsupported()
    if why:
        caps["mxfp4_dequant"]["unavailable"] = why
    dev = DEVICE
    if DEVICE.startswith("cuda"):
        dev = "CUDA %s" % torch.cuda.get_device_name(0)
    cw.serve(name="torch", version="1", ops=ops, capabilities={"ops": caps},
             libraries={"torch": torch.__version__, "numpy": np.__version__,
                        "cuda": str(torch.version.cuda)},
             device=dev)

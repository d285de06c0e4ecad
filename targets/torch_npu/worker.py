"""torch_npu worker (Ascend, Atlas runners): FA and PA through npu_fused_infer_attention_score,
FP4 -> BF16 through npu_dtype_cast, MC2 MatmulAllReduce through npu_mm_all_reduce_base under
torchrun with HCCL (this worker coordinates: one process per rank, see mc2_rank.py).

Argument building and layout handling are plain functions in fia_args.py (tested anywhere).
Without torch_npu this worker answers the handshake with `unavailable: <import error>`.
Timings use NPU events (device time) around each call after synchronisation.
"""
import os
import socket
import subprocess
import sys

import conform_worker as cw

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# Tests only: the CPU stand-in for torch / torch_npu (standin/README.md); it refuses to load
# where the real modules exist, and everything this worker reports then names it.
if os.environ.get("CONFORM_TORCH_NPU_STANDIN") == "1":
    sys.path.insert(0, os.path.join(HERE, "standin"))

try:
    import numpy as np
    import torch
    import torch_npu  # noqa: F401  (registers the NPU device and torch.ops.npu)

    import fia_args as fa
except Exception as e:
    cw.unavailable("import failed: %s: %s" % (type(e).__name__, e))

DEVICE = "npu:%s" % os.environ.get("CONFORM_NPU_DEVICE", "0")
STANDIN = bool(getattr(torch_npu, "STANDIN", False))
# Every case says which module ran it.
MODULE_NOTE = "torch_npu %s%s" % (
    getattr(torch_npu, "__version__", "?"),
    " (conform CPU stand-in on numpy: not a device run)" if STANDIN else "")
TORCH_DT = {"F32": torch.float32, "F16": torch.float16}


def to_device(arr, dtype):
    if dtype == "BF16":
        t = torch.from_numpy(np.ascontiguousarray(arr).view(np.int16)).view(torch.bfloat16)
    else:
        t = torch.from_numpy(np.ascontiguousarray(arr))
    return t.to(DEVICE)


def to_host(t, dtype):
    t = t.detach().cpu()
    if dtype == "BF16":
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def npu_timer(fn):
    start = torch.npu.Event(enable_timing=True)
    end = torch.npu.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3  # ms -> us


def _scale_keyword():
    import inspect
    try:
        sig = str(inspect.signature(torch_npu.npu_fused_infer_attention_score))
    except (TypeError, ValueError):
        sig = getattr(torch_npu.npu_fused_infer_attention_score, "__doc__", "") or ""
    return "scale_value" if "scale_value" in sig and "scale=" not in sig else "scale"


def attention(case):
    try:
        kw, mask_kind = fa.fia_kwargs(case.op, case.params, _scale_keyword())
    except fa.ArgError as e:
        raise cw.Unsupported(str(e))
    dt = case.input_dtypes["query"]
    q = to_device(case.inputs["query"], dt)
    if case.op == "pa_decode":
        k = to_device(case.inputs["key_cache"], dt)
        v = to_device(case.inputs["value_cache"], dt)
        kw["block_table"] = to_device(case.inputs["block_table"], "I32")
        case.note("PA through FIA block_table, cache layout %s"
                  % case.params.get("cache_layout", "BnBsH"))
    else:
        k = to_device(case.inputs["key"], dt)
        v = to_device(case.inputs["value"], dt)
    if mask_kind == "compressed":
        kw["atten_mask"] = torch.from_numpy(fa.compressed_causal_mask()).to(DEVICE)
    elif mask_kind == "explicit":
        kw["atten_mask"] = torch.from_numpy(fa.explicit_mask(case.inputs["atten_mask"])).to(DEVICE)

    def call():
        return torch_npu.npu_fused_infer_attention_score(q, k, v, **kw)

    case.note(MODULE_NOTE)
    out, lse = case.time(call, sync=torch.npu.synchronize, timer=npu_timer)
    res = {"attention_out": to_host(out, dt)}
    if kw["softmax_lse_flag"]:
        res["softmax_lse"] = fa.lse_from_kernel(to_host(lse, "F32"), kw["input_layout"])
    return res


def fp4_dequant(case):
    """FP4 E2M1 codes (U8, two per byte) -> BF16 via npu_dtype_cast, then the group scale."""
    if case.op != "mxfp4_dequant":
        raise cw.Unsupported("only mxfp4_dequant maps onto npu_dtype_cast")
    import conform_fp4 as f4
    t = f4.TENSORS["mxfp4_dequant"]
    if case.params.get("packing", "low_first") != "low_first":
        raise cw.Unsupported("float4_e2m1fn_x2 is low nibble first")
    if case.params.get("element", "e2m1") != "e2m1":
        raise cw.Unsupported("float4_e2m1fn_x2 decodes E2M1 only, not %s" % case.params["element"])
    codes = to_device(case.inputs[t["codes"]], "U8")

    def call():
        return torch_npu.npu_dtype_cast(codes, torch.bfloat16,
                                        input_dtype=torch_npu.float4_e2m1fn_x2)

    case.note(MODULE_NOTE)
    q = case.time(call, sync=torch.npu.synchronize, timer=npu_timer)
    scale = f4.e8m0_to_f32(case.inputs[t["scale"]])
    scale = torch.from_numpy(f4.group_scale(scale, q.shape[-1], 32)).to(DEVICE)
    y = (q.float() * scale).to(torch.bfloat16)
    case.note("FP4 -> BF16 by npu_dtype_cast, then x E8M0 scale in f32, one RNE rounding")
    return {t["out"]: to_host(y, "BF16")}


def mc2(case):
    p = case.params
    # The suites' parameter (x1 is [ranks, m, k]): one process per rank.
    world = int(p["ranks"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    try:
        cmd = fa.mc2_launch_command(sys.executable, os.path.join(HERE, "mc2_rank.py"), world,
                                    case.inputs_path, case.outputs_path + ".mc2", port)
    except fa.ArgError as e:
        raise cw.Unsupported(str(e))
    env = dict(os.environ, CONFORM_TIMING=str(case.timing or ""))
    if STANDIN:  # the rank processes import the stand-in too
        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(HERE, "standin")] + [x for x in [env.get("PYTHONPATH")] if x])
    r = subprocess.run(cmd, env=env, stdout=sys.stderr, stderr=sys.stderr)
    if r.returncode != 0:
        raise RuntimeError("torchrun exited with %d" % r.returncode)
    tensors, dtypes, meta = cw.read_safetensors(case.outputs_path + ".mc2")
    if meta.get("timings_us"):
        case.timings_us = [float(x) for x in meta["timings_us"].split(",")]
    case.note(MODULE_NOTE)
    case.note("npu_mm_all_reduce_base on %d ranks (torchrun, HCCL)" % world)
    return {fa.MC2_TENSORS["out"]: tensors[fa.MC2_TENSORS["out"]]}


if __name__ == "__main__":
    try:
        props = torch.npu.get_device_name(0)
    except Exception as e:
        cw.unavailable("no NPU device: %s" % e)
    libs = {"torch": torch.__version__, "torch_npu": getattr(torch_npu, "__version__", "?"),
            "numpy": np.__version__}
    if STANDIN:
        libs["torch_npu"] += " (conform CPU stand-in)"
        libs["torch"] += " (conform CPU stand-in)"
    cann = os.environ.get("ASCEND_TOOLKIT_HOME") or os.environ.get("ASCEND_HOME_PATH")
    if cann:
        libs["CANN"] = os.path.basename(os.path.realpath(cann))
    attn = {"dtypes": ["f16", "bf16"], "layouts": list(fa.LAYOUTS),
            "limits": {"num_heads": {"max": 256}, "head_dim": {"max": 512},
                       "sparse_mode": {"one_of": [0, 2, 3, 4]}},
            "recipes": ["npu_fia"]}
    caps = {
        "fa_prefill": attn,
        "pa_decode": dict(attn, limits=dict(attn["limits"], block_size={"min": 16, "max": 512})),
        # Exact E2M1 decode (npu_dtype_cast), x the power-of-two E8M0 scale in f32 (exact),
        # one RNE cast to BF16: the OCP MX definition, so its cases are judged bitwise.
        "mxfp4_dequant": {"dtypes": ["bf16"], "recipes": ["npu_dtype_cast", "mx_ocp"],
                          "limits": {"packing": {"one_of": ["low_first"]},
                                     "element": {"one_of": ["e2m1"]}}},
        "mc2_matmul_allreduce": {"dtypes": ["f16", "bf16"],
                                 "limits": {"ranks": {"one_of": [1, 2, 4, 8]}},
                                 "recipes": ["npu_mm_all_reduce_base"]},
    }
    # What this build and device cannot run: those cases are skipped with the reason.
    for op, why in fa.probe(torch_npu, props).items():
        caps[op] = dict(caps[op], unavailable=why)
    cw.serve(
        name="torch_npu",
        version="1",
        ops={"fa_prefill": attention, "pa_decode": attention, "mxfp4_dequant": fp4_dequant,
             "mc2_matmul_allreduce": mc2},
        capabilities={"ops": caps},
        libraries=libs,
        device=props if STANDIN else "Ascend %s" % props,
    )

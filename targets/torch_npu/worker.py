"""torch_npu worker (Ascend, Atlas runners): FA and PA through npu_fused_infer_attention_score,
FP4 -> BF16 through npu_dtype_cast, MC2 MatmulAllReduce through npu_mm_all_reduce_base under
torchrun with HCCL (this worker coordinates: one process per rank, see mc2_rank.py), MXFP4
W4A16 through npu_weight_quant_batchmatmul (per-group), paged KV writes through
_npu_reshape_and_cache / npu_scatter_nd_update_, per-token INT8 quantisation through
npu_dynamic_quant, a decode step over an INT8 (C8) cache (torch-op quantisation, the cache
writes, FIA with antiquant scales), W8A8 matmul through npu_quant_matmul (with
npu_trans_quant_param for the packed scale), the MoE dispatch/combine round trip through
npu_moe_distribute_dispatch_v2 / npu_moe_distribute_combine_v2 under torchrun (moe_rank.py),
a DeepSeek MLA decode step (the latent cache write through _npu_reshape_and_cache, FIA with
query_rope / key_rope over the paged latent cache).
Every argument mapping, constraint and device
limit is traced to its source in docs/ascend.md ("The torch_npu worker").

Argument building and layout handling are plain functions in fia_args.py (tested anywhere).
Without torch_npu this worker answers the handshake with `unavailable: <import error>`.
Timings use NPU events (device time) around each call after synchronisation.
"""
import json
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
# Why NNAL's ATB does not load here (set at the handshake by atb_check), or None: the cases
# that write through _npu_reshape_and_cache are then skipped with it (fa.needs_atb).
ATB_REASON = None
# Every case says which module ran it.
MODULE_NOTE = "torch_npu %s%s" % (
    getattr(torch_npu, "__version__", "?"),
    " (conform CPU stand-in on numpy: not a device run)" if STANDIN else "")


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


def atb_check():
    """Loads ATB the way the cases will, with one tiny _npu_reshape_and_cache call (a token of
    16 f16 values into a one-block cache): torch_npu loads op-plugin's ATB library, and with it
    NNAL's libatb.so, on the first ATB operator, so the attribute alone says nothing. Returns
    the skip reason, or None."""
    if not hasattr(torch_npu, "_npu_reshape_and_cache"):
        return "torch_npu %s has no _npu_reshape_and_cache (ATB ReshapeAndCache)" % (
            getattr(torch_npu, "__version__", "?"))
    try:
        row = to_device(np.zeros((1, 1, 16), np.float16), "F16")
        kc = to_device(np.zeros((1, 16, 1, 16), np.float16), "F16")
        vc = to_device(np.zeros((1, 16, 1, 16), np.float16), "F16")
        slot = to_device(np.zeros(1, np.int32), "I32")
        torch_npu._npu_reshape_and_cache(row, row, kc, vc, slot)
        torch.npu.synchronize()
    except Exception as e:
        import platform
        return fa.atb_unavailable(e, os.environ.get("CONFORM_CANN_RELEASE"), platform.machine())
    return None


def atb_required(case):
    """Skips a case that writes through ATB where ATB does not load."""
    if ATB_REASON and fa.needs_atb(case.op, case.params):
        raise cw.Unsupported(ATB_REASON)


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
    if case.op == "pa_decode" and mask_kind == "explicit":
        # A fully masked row needs the row-invalid correction (inner_precise 2/3), which the
        # decode path does not accept (fia_args.inner_precise_for). Without it the page
        # promises only that precision may be lost; the decode kernel's source computes the
        # row like any other (output mean(V), lse ln(n) - 1e12: docs/ascend.md
        # `fa.ascend_ifa_bf16.empty_row`), a convention of the kernel, not a numeric answer
        # the f64 oracle's 0 and +inf could judge by error ratio.
        m = np.asarray(case.inputs["atten_mask"]) != 0
        lens = [int(x) for x in case.params["actual_seq_lengths_kv"]]
        if any(lens[b] > 0 and bool(m[b, :, :lens[b]].all(axis=-1).any())
               for b in range(m.shape[0])):
            raise cw.Unsupported(
                "a query row sees no key: the decode path runs without the row-invalid "
                "correction (inner_precise 0), where the aclnn page promises only that "
                "precision may be lost and the kernel's source gives mean(V) and lse "
                "ln(n) - 1e12 (fa.ascend_ifa_bf16.empty_row), which the oracle's 0 and +inf "
                "cannot judge")
    dt = case.input_dtypes["query"]
    query = case.inputs["query"]
    if kw["input_layout"] != case.params.get("input_layout", "BSND"):
        # One query row: the case's BSND/BSH query is the same bytes as BNSD (fia_args).
        b = query.shape[0]
        query = np.ascontiguousarray(query).reshape(b, kw["num_heads"], 1, -1)
        case.note("query passed as BNSD (one row: the same bytes as %s), the layout FIA "
                  "takes with a BnNBsD cache" % case.params.get("input_layout", "BSND"))
    q = to_device(query, dt)
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
    if kw["inner_precise"] == 2:
        case.note("inner_precise 2: a query row may see no key, so the row-invalid "
                  "correction is on")

    def call():
        return torch_npu.npu_fused_infer_attention_score(q, k, v, **kw)

    case.note(MODULE_NOTE)
    out, lse = case.time(call, sync=torch.npu.synchronize, timer=npu_timer)
    out = to_host(out, dt).reshape(case.output_shapes["attention_out"])
    res = {"attention_out": out}
    if kw["softmax_lse_flag"]:
        res["softmax_lse"] = fa.lse_from_kernel(to_host(lse, "F32"), kw["input_layout"])
    padded = fa.padded_rows(case.params)
    if padded:
        # The page does not say the kernel writes query rows past actual_seq_lengths (the
        # output is allocated uninitialised): those bytes are not the kernel's result. They
        # are set to the value conform states for padded rows (0, LSE +inf), and said so.
        out = np.array(out)
        layout = case.params.get("input_layout", "BSND")
        zero = np.zeros((), out.dtype)
        for b, first in padded:
            if layout in ("BSND", "BSH", "BNSD_BSND"):
                out[b, first:] = zero
            else:  # BNSD
                out[b, :, first:] = zero
        res["attention_out"] = out
        if "softmax_lse" in res:
            lse = np.array(res["softmax_lse"])
            for b, first in padded:
                lse[b, :, first:] = np.inf
            res["softmax_lse"] = lse
        case.note("query rows past actual_seq_lengths (%s) are not documented as written: "
                  "set by the worker to 0 (LSE +inf), not read from the kernel"
                  % ", ".join("batch %d from row %d" % x for x in padded))
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
    have = torch.npu.device_count()
    if have < world:
        raise cw.Unsupported("MC2 on %d ranks needs %d NPUs (one per rank); this host has %d"
                             % (world, world, have))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out_path = case.outputs_path + ".mc2"
    try:
        cmd = fa.mc2_launch_command(sys.executable, os.path.join(HERE, "mc2_rank.py"), world,
                                    case.inputs_path, out_path, port)
    except fa.ArgError as e:
        raise cw.Unsupported(str(e))
    env = dict(os.environ, CONFORM_TIMING=json.dumps(case.timing or {}))
    if STANDIN:  # the rank processes import the stand-in too
        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(HERE, "standin")] + [x for x in [env.get("PYTHONPATH")] if x])
    r = subprocess.run(cmd, env=env, stdout=sys.stderr, stderr=sys.stderr)
    if r.returncode != 0:
        raise RuntimeError("torchrun exited with %d" % r.returncode)
    tensors, dtypes, meta = cw.read_safetensors(out_path)
    if case.timing:
        # Each rank timed its own calls with NPU events after a barrier; an iteration takes
        # as long as its slowest rank.
        per_rank = []
        for rank in range(world):
            with open("%s.rank%d.json" % (out_path, rank)) as f:
                per_rank.append(json.load(f)["timings_us"])
        case.timings_us = fa.mc2_iteration_times(per_rank)
        case.note("timings: per iteration, the largest over the %d ranks of the NPU-event time "
                  "around the call (after a barrier); torchrun's launch is not timed" % world)
    case.note(MODULE_NOTE)
    case.note("npu_mm_all_reduce_base on %d ranks (torchrun, HCCL); bias and x3 passed on "
              "rank 0 only" % world)
    return {fa.MC2_TENSORS["out"]: tensors[fa.MC2_TENSORS["out"]]}


def moe(case):
    """The MoE dispatch/combine round trip: one process per rank under torchrun (see
    moe_rank.py): npu_moe_distribute_dispatch_v2, the expert step with torch ops, then
    npu_moe_distribute_combine_v2 with the dispatch's own assist_info_for_combine and
    ep_recv_counts. Each rank returns its valid received rows, their scales, its
    expert_token_nums and its active tokens' output; they are concatenated in rank order."""
    p = case.params
    world = int(p["ranks"])
    have = torch.npu.device_count()
    if have < world:
        raise cw.Unsupported("moe_dispatch_combine on %d ranks needs %d NPUs (one per rank); "
                             "this host has %d" % (world, world, have))
    why = fa.moe_unsupported(p, torch.npu.get_device_name(0), fa.moe_hierarchy(os.environ))
    if why:
        raise cw.Unsupported(why)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out_path = case.outputs_path + ".moe"
    cmd = fa.mc2_launch_command(sys.executable, os.path.join(HERE, "moe_rank.py"), world,
                                case.inputs_path, out_path, port, any_world=True)
    env = dict(os.environ, CONFORM_MOE_PARAMS=json.dumps(p))
    if STANDIN:
        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(HERE, "standin")] + [x for x in [env.get("PYTHONPATH")] if x])
    r = subprocess.run(cmd, env=env, stdout=sys.stderr, stderr=sys.stderr)
    if r.returncode != 0:
        raise RuntimeError("torchrun exited with %d" % r.returncode)
    parts = [cw.read_safetensors("%s.rank%d" % (out_path, rank))[0] for rank in range(world)]
    out = {name: np.concatenate([np.asarray(t[name]) for t in parts])
           for name in parts[0]}
    case.note(MODULE_NOTE)
    case.note("npu_moe_distribute_dispatch_v2 + expert gain (torch ops) + "
              "npu_moe_distribute_combine_v2 on %d ranks (torchrun, HCCL)" % world)
    return out


def w4a16(case):
    """MXFP4 W4A16 through npu_weight_quant_batchmatmul, per-group: the E2M1 weights re-encoded
    exactly as INT8 (2 x value) with a BF16 antiquant_scale of half the E8M0 scale."""
    p = case.params
    x = case.inputs["x"]
    codes = case.inputs["weight"]
    k = x.shape[1]
    try:
        g = fa.w4a16_args(p, k)
    except fa.ArgError as e:
        raise cw.Unsupported(str(e))
    w = fa.e2m1_as_int8(codes, p.get("packing", "low_first"))  # [n, k]
    scale = fa.e8m0_half_as_f32(case.inputs["scale"])  # [n, k / g]
    xd = to_device(x, case.input_dtypes["x"])
    wd = torch.from_numpy(np.ascontiguousarray(w.T)).to(DEVICE)  # (k, n)
    sd = to_device(cw.from_f32(np.ascontiguousarray(scale.T), "BF16"), "BF16")  # (k/g, n)

    def call():
        return torch_npu.npu_weight_quant_batchmatmul(xd, wd, sd, antiquant_group_size=g)

    case.note(MODULE_NOTE)
    y = case.time(call, sync=torch.npu.synchronize, timer=npu_timer)
    case.note("npu_weight_quant_batchmatmul per-group %d: E2M1 weights as INT8 (2 x value) and "
              "antiquant_scale = E8M0 scale / 2 in BF16, both exact" % g)
    return {"y": to_host(y, "BF16")}


def paged_kv(case):
    p = case.params
    layout = p["layout"]
    dt = p.get("dtype", "bf16")
    bs = int(p["block_size"])
    slots = np.asarray(case.inputs["slot_mapping"]).astype(np.int64)
    valid = slots >= 0
    if not valid.any():
        raise cw.Unsupported("every slot is padding: the worker drops padding slots before the "
                             "call (the cache-write pages do not document negative slots), so "
                             "no kernel would run")
    key = np.ascontiguousarray(case.inputs["key"][valid])
    value = np.ascontiguousarray(case.inputs["value"][valid])
    n, d = key.shape[1], key.shape[2]
    storage = case.input_dtypes["key"]
    try:
        how, idx = fa.cache_write_plan(layout, dt, slots[valid], n, d, bs,
                                       case.inputs["key_cache_in"].dtype.itemsize)
    except fa.ArgError as e:
        raise cw.Unsupported(str(e))
    kc_in, vc_in = case.inputs["key_cache_in"], case.inputs["value_cache_in"]
    if how == "reshape_and_cache":
        atb_required(case)
        # [blocks, bs, N*D] is [blocks, bs, N, D] in memory, the cache shape ATB takes.
        kc = to_device(np.ascontiguousarray(kc_in).reshape(kc_in.shape[0], bs, n, d), storage)
        vc = to_device(np.ascontiguousarray(vc_in).reshape(vc_in.shape[0], bs, n, d), storage)
        kt, vt = to_device(key, storage), to_device(value, storage)
        st = to_device(slots[valid].astype(np.int32), "I32")

        def call():
            torch_npu._npu_reshape_and_cache(kt, vt, kc, vc, st)
        case.note("torch_npu._npu_reshape_and_cache (ATB ReshapeAndCache), padding slots dropped")
    else:
        kc, vc = to_device(np.ascontiguousarray(kc_in), storage), to_device(
            np.ascontiguousarray(vc_in), storage)
        kidx = to_device(np.ascontiguousarray(idx[0], dtype=np.int64), "I64")
        vidx = to_device(np.ascontiguousarray(idx[1], dtype=np.int64), "I64")
        kup = key.reshape(idx[0].shape[:-1] + kc_in.shape[idx[0].shape[-1]:])
        vup = value.reshape(idx[1].shape[:-1] + vc_in.shape[idx[1].shape[-1]:])
        kt, vt = to_device(kup, storage), to_device(vup, storage)

        def call():
            torch_npu.npu_scatter_nd_update_(kc, kidx, kt)
            torch_npu.npu_scatter_nd_update_(vc, vidx, vt)
        case.note("torch_npu.npu_scatter_nd_update_ per cache (%s), padding slots dropped"
                  % layout)
    case.note(MODULE_NOTE)
    case.time(call, sync=torch.npu.synchronize, timer=npu_timer)
    return {"key_cache_out": to_host(kc, storage).reshape(kc_in.shape),
            "value_cache_out": to_host(vc, storage).reshape(vc_in.shape)}


def dynamic_quant(case):
    """Per-token INT8 quantisation through npu_dynamic_quant(x, smooth_scales=..., group_index=...):
    y int8 with x's shape, scale f32 with x's shape less its last axis. dst_type is left at its
    default (int8)."""
    p = case.params
    dt = case.input_dtypes["x"]
    x = to_device(case.inputs["x"], dt)
    kwargs = {}
    if p.get("smooth"):
        kwargs["smooth_scales"] = to_device(case.inputs["smooth_scales"], dt)
    if p.get("groups"):
        kwargs["group_index"] = to_device(
            np.asarray(case.inputs["group_index"]).astype(np.int32), "I32")

    def call():
        return torch_npu.npu_dynamic_quant(x, **kwargs)

    case.note(MODULE_NOTE)
    y, scale = case.time(call, sync=torch.npu.synchronize, timer=npu_timer)
    return {"y": to_host(y, "I8"), "scale": to_host(scale, "F32")}


def pa_decode_int8(case):
    """One decode step over an INT8 cache, as vLLM-Ascend's C8 path runs it: the new K/V rows
    quantised on the device with torch ops in their dtype (clamp(round(x * (1 / scale) -
    offset), -128, 127), FIA's offset being vLLM's negated; per-token parameters are float32,
    so the arithmetic is float32 there), written with _npu_reshape_and_cache (BnBsH) or
    npu_scatter_nd_update_ (BnNBsD), then npu_fused_infer_attention_score with the INT8 caches,
    block_table and key/value_antiquant_scale (and offsets) in the case's modes."""
    p = case.params
    try:
        kw = fa.c8_kwargs(p, _scale_keyword())
    except fa.ArgError as e:
        raise cw.Unsupported(str(e))
    atb_required(case)
    dt = case.input_dtypes["query"]
    bs = int(p.get("block_size", 128))
    layout = p.get("cache_layout", "BnBsH")
    slots = np.asarray(case.inputs["slot_mapping"]).astype(np.int64)
    rows_b, rows_pos = fa.c8_rows(p, len(slots))
    params, caches = {}, {}
    for which in ("key", "value"):
        mode = kw[which + "_antiquant_mode"]
        sname, oname = which + "_antiquant_scale", which + "_antiquant_offset"
        scale = case.inputs[sname]
        offset = case.inputs.get(oname) if p.get("antiquant_offset") else None
        params[which] = (to_device(scale, case.input_dtypes[sname]),
                         None if offset is None else to_device(offset, case.input_dtypes[oname]))
        # The parameters each new row's elements take: its channel's ([1, N, D]) or its
        # token's (the (sequence, position) entry of [1, B, S], as [T, 1, 1]).
        if mode == 0:
            s_rows, o_rows = params[which]
        else:
            pick = lambda a: np.ascontiguousarray(a[0][rows_b, rows_pos].reshape(-1, 1, 1))
            s_rows = to_device(pick(scale), "F32")
            o_rows = None if offset is None else to_device(pick(offset), "F32")
        x = to_device(case.inputs[which], case.input_dtypes[which])
        v = x * (1.0 / s_rows)
        if o_rows is not None:
            v = v - o_rows
        caches[which] = (torch.clamp(torch.round(v), min=-128, max=127).to(torch.int8),
                         to_device(case.inputs[which + "_cache_in"], "I8"))
    (kq, kc), (vq, vc) = caches["key"], caches["value"]
    kc_in = case.inputs["key_cache_in"]
    n, d = case.inputs["key"].shape[1], case.inputs["key"].shape[2]
    if layout == "BnBsH":
        # [blocks, bs, N*D] is [blocks, bs, N, D] in memory, the cache shape ATB takes.
        kc4 = kc.reshape(kc_in.shape[0], bs, n, d)
        vc4 = vc.reshape(kc_in.shape[0], bs, n, d)
        st = to_device(slots.astype(np.int32), "I32")
        torch_npu._npu_reshape_and_cache(kq, vq, kc4, vc4, st)
        kc, vc = kc4.reshape(kc_in.shape), vc4.reshape(kc_in.shape)
        case.note("new rows quantised by torch ops, written by _npu_reshape_and_cache (INT8)")
    else:
        _, idx = fa.cache_write_plan(layout, "int8", slots, n, d, bs, 1)
        ki = to_device(np.ascontiguousarray(idx[0], dtype=np.int64), "I64")
        torch_npu.npu_scatter_nd_update_(kc, ki, kq)
        torch_npu.npu_scatter_nd_update_(vc, ki, vq)
        case.note("new rows quantised by torch ops, written by npu_scatter_nd_update_ (INT8)")
    query = case.inputs["query"]
    if kw["input_layout"] != p.get("input_layout", "BSND"):
        query = np.ascontiguousarray(query).reshape(query.shape[0], kw["num_heads"], 1, -1)
        case.note("query passed as BNSD (one row: the same bytes), the layout FIA takes with a "
                  "BnNBsD cache")
    q = to_device(query, dt)
    kw["block_table"] = to_device(case.inputs["block_table"], "I32")
    kw["key_antiquant_scale"], kw["value_antiquant_scale"] = (params["key"][0],
                                                              params["value"][0])
    if p.get("antiquant_offset"):
        kw["key_antiquant_offset"], kw["value_antiquant_offset"] = (params["key"][1],
                                                                    params["value"][1])

    def call():
        return torch_npu.npu_fused_infer_attention_score(q, kc, vc, **kw)

    case.note(MODULE_NOTE)
    out, _ = case.time(call, sync=torch.npu.synchronize, timer=npu_timer)
    return {"key_cache_out": to_host(kc, "I8").reshape(kc_in.shape),
            "value_cache_out": to_host(vc, "I8").reshape(kc_in.shape),
            "attention_out": to_host(out, dt).reshape(case.output_shapes["attention_out"])}
def mla_decode(case):
    """One DeepSeek MLA decode step as vLLM-Ascend runs it: this step's latent rows (c_kv
    [T, 1, 512]) and rope keys (k_pe [T, 1, 64]) written by _npu_reshape_and_cache(key=c_kv,
    value=k_pe, key_cache, value_cache, slot_indices) into the two caches in the
    [blocks, block_size, 1, D] shape it allocates, then npu_fused_infer_attention_score(
    q_nope, k_nope, k_nope, query_rope=q_pe, key_rope=k_pe, num_heads=N,
    num_key_value_heads=1, input_layout, scale, block_table, block_size,
    actual_seq_lengths_kv, softmax_lse_flag) with the latent cache as both key and value."""
    p = case.params
    try:
        kw, cache_form = fa.mla_kwargs(p, _scale_keyword())
    except fa.ArgError as e:
        raise cw.Unsupported(str(e))
    dt = case.input_dtypes["query"]
    bs = kw["block_size"]
    kv_in, rope_in = case.inputs["kv_cache_in"], case.inputs["rope_cache_in"]
    blocks, lora, rope = kv_in.shape[0], kv_in.shape[-1], rope_in.shape[-1]
    # The case's [blocks, 1, bs, D] caches are [blocks, bs, 1, D] in memory (one KV head).
    kc = to_device(np.ascontiguousarray(kv_in).reshape(blocks, bs, 1, lora), dt)
    rc = to_device(np.ascontiguousarray(rope_in).reshape(blocks, bs, 1, rope), dt)
    slots = to_device(np.asarray(case.inputs["slot_mapping"]).astype(np.int32), "I32")
    torch_npu._npu_reshape_and_cache(to_device(case.inputs["kv"], dt),
                                     to_device(case.inputs["k_rope"], dt), kc, rc, slots)
    if cache_form == "BnNBsD":
        k_nope, k_pe = kc.reshape(blocks, 1, bs, lora), rc.reshape(blocks, 1, bs, rope)
    else:
        k_nope, k_pe = kc.reshape(blocks, bs, lora), rc.reshape(blocks, bs, rope)
        case.note("caches passed as (blocknum, blocksize, 512) / (blocknum, blocksize, 64), the "
                  "same bytes with one KV head: the cache form FIA takes with a BSND query")
    q = to_device(case.inputs["query"], dt)
    kw["query_rope"] = to_device(case.inputs["query_rope"], dt)
    kw["key_rope"] = k_pe
    kw["block_table"] = to_device(case.inputs["block_table"], "I32")

    def call():
        return torch_npu.npu_fused_infer_attention_score(q, k_nope, k_nope, **kw)

    case.note(MODULE_NOTE)
    case.note("latent rows written by _npu_reshape_and_cache, then FIA with query_rope/key_rope "
              "over the paged latent cache (key = value = the c_kv cache)")
    out, lse = case.time(call, sync=torch.npu.synchronize, timer=npu_timer)
    res = {"kv_cache_out": to_host(kc, dt).reshape(kv_in.shape),
           "rope_cache_out": to_host(rc, dt).reshape(rope_in.shape),
           "attention_out": to_host(out, dt).reshape(case.output_shapes["attention_out"])}
    if kw["softmax_lse_flag"]:
        res["softmax_lse"] = fa.lse_from_kernel(to_host(lse, "F32"), kw["input_layout"])
    return res


TORCH_OUT = {"BF16": "bfloat16", "F16": "float16", "I8": "int8"}


def quant_matmul(case):
    """W8A8 through npu_quant_matmul(x1, x2, scale, pertoken_scale=..., bias=...,
    output_dtype=...): x1 int8 (m, k), x2 int8 (k, n), scale (n,) f32 or bf16, or for the
    packed form the int64 of npu_trans_quant_param(scale) (round_mode left at 0: truncation);
    pertoken_scale f32 (m,); bias int32 / f32 / bf16 (n,); output_dtype bfloat16 or float16,
    or int8 (requantisation) with the f32 offset packed by npu_trans_quant_param(scale, offset)
    and also passed as offset=, as the page's example does."""
    p = case.params
    try:
        fa.quant_matmul_check(p)
    except fa.ArgError as e:
        raise cw.Unsupported(str(e))
    x1 = to_device(np.asarray(case.inputs["x1"]), "I8")
    x2 = to_device(np.asarray(case.inputs["x2"]), "I8")
    scale = to_device(case.inputs["scale"], case.input_dtypes["scale"])
    kwargs = {"output_dtype": getattr(torch, TORCH_OUT[case.output_dtypes["y"]])}
    if p.get("offset"):
        kwargs["offset"] = to_device(case.inputs["offset"], "F32")
    if p.get("scale", "f32") == "packed":
        scale = torch_npu.npu_trans_quant_param(scale, kwargs.get("offset"))
    if p.get("pertoken"):
        kwargs["pertoken_scale"] = to_device(case.inputs["pertoken_scale"], "F32")
    if p.get("bias", "none") != "none":
        kwargs["bias"] = to_device(case.inputs["bias"], case.input_dtypes["bias"])

    def call():
        return torch_npu.npu_quant_matmul(x1, x2, scale, **kwargs)

    case.note(MODULE_NOTE)
    y = case.time(call, sync=torch.npu.synchronize, timer=npu_timer)
    return {"y": to_host(y, case.output_dtypes["y"])}


def _read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


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
    libs.update(fa.toolkit_versions(os.environ, _read_text))
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
        "w4a16_matmul": {"dtypes": ["bf16"], "recipes": ["npu_weight_quant_batchmatmul"],
                         "limits": {"packing": {"one_of": ["low_first", "high_first"]},
                                    "element": {"one_of": ["e2m1"]}}},
        "paged_kv": {"dtypes": ["bf16", "f16", "f32"], "layouts": ["BnBsH", "BnNBsD", "vllm"],
                     "recipes": ["reference"]},
        # The A2 kernel's own arithmetic: its cases are judged bit for bit.
        "dynamic_quant": {"dtypes": ["bf16", "f16"], "recipes": ["ascend_a2"]},
        # The write is vLLM-Ascend's torch ops; the attention is FIA's own (its int8 matmul
        # pieces are not the reference recipe's): judged within one step and by error ratio.
        "pa_decode_int8": {"dtypes": ["bf16", "f16"], "layouts": ["BSND", "BNSD", "BSH"],
                           "recipes": ["npu_fia"]},
        # The A2 kernel's order (quant_batch_matmul_v3): judged bit for bit.
        "quant_matmul": {"recipes": ["ascend_a2"]},
        # The kernels' documented arithmetic end to end: judged bit for bit.
        "moe_dispatch_combine": {"dtypes": ["bf16", "f16"], "recipes": ["ascend_v2"]},
        # vLLM-Ascend's write (a copy, judged bit for bit) and FIA's own MLA arithmetic (the
        # AMLA rescale is the reference recipe's model, not claimed here): the attention is
        # judged by its error ratio against the oracle.
        "mla_decode": {"dtypes": ["bf16", "f16"], "layouts": ["BNSD", "BSND"],
                       "recipes": ["npu_fia"]},
    }
    # What this build and device cannot run: those cases are skipped with the reason. ATB is
    # loaded only where a case would use it (an op that writes through it can run here).
    reasons = fa.probe(torch_npu, props)
    if any(op not in reasons for op in ("mla_decode", "paged_kv", "pa_decode_int8")):
        ATB_REASON = atb_check()
        reasons = fa.probe(torch_npu, props, atb=ATB_REASON)
        libs["ATB"] = "%s, %s" % (libs.get("ATB", "version not recorded"),
                                  "loads" if ATB_REASON is None else "does not load")
    for op, why in reasons.items():
        caps[op] = dict(caps[op], unavailable=why)
    cw.serve(
        name="torch_npu",
        version="2",
        ops={"fa_prefill": attention, "pa_decode": attention, "mxfp4_dequant": fp4_dequant,
             "mc2_matmul_allreduce": mc2, "w4a16_matmul": w4a16, "paged_kv": paged_kv,
             "dynamic_quant": dynamic_quant, "pa_decode_int8": pa_decode_int8,
             "quant_matmul": quant_matmul, "moe_dispatch_combine": moe,
             "mla_decode": mla_decode},
        capabilities={"ops": caps},
        libraries=libs,
        device=("%s (conform CPU stand-in simulating it: numpy, no NPU)" % props if STANDIN
                else "Ascend %s" % props),
    )

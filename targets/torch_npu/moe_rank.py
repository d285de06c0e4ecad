"""One rank of a moe_dispatch_combine case, launched by torchrun from worker.py.
Reads the case's inputs (x [W, BS, H], expert_ids / expert_scales [W, BS, K], expert_gain,
optional scales and x_active_mask) and the parameters (CONFORM_MOE_PARAMS), runs
npu_moe_distribute_dispatch_v2 on its shard, the expert step with torch ops (the rows of local
expert l, grouped by expert_token_nums, dequantised with dynamic_scales and multiplied by that
expert's gain, one rounding to the dtype), then npu_moe_distribute_combine_v2 with the
dispatch's own metadata, and writes its valid received rows, scales, expert_token_nums and its
active tokens' output to <outputs>.rank<r>."""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))
if os.environ.get("CONFORM_TORCH_NPU_STANDIN") == "1":  # tests only (standin/README.md)
    sys.path.insert(0, os.path.join(HERE, "standin"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch_npu  # noqa: E402,F401

import conform_worker as cw  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs")
    ap.add_argument("--outputs")
    a = ap.parse_args()
    rank = int(os.environ["RANK"])
    torch.npu.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group(backend="hccl")
    pg = dist.group.WORLD
    hcom = pg._get_backend(torch.device("npu")).get_hccl_comm_name(rank)
    p = json.loads(os.environ["CONFORM_MOE_PARAMS"])
    tensors, dtypes, _ = cw.read_safetensors(a.inputs)
    W, BS, H, E, K = (int(p[n]) for n in ("ranks", "bs", "hidden", "experts", "top_k"))
    S = int(p.get("shared_ranks", 0))
    ns = int(p.get("shared_experts", 0))
    L = E // (W - S)
    dt = dtypes["x"]
    active = [int(v) for v in p["active"]] if p.get("active") is not None else [BS] * W

    def dev(x, d):
        if d == "BF16":
            return torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16).npu()
        return torch.from_numpy(np.ascontiguousarray(x)).npu()

    x = dev(tensors["x"][rank], dt)
    ids = dev(np.asarray(tensors["expert_ids"][rank]).astype(np.int32), "I32")
    shard_w = np.asarray(tensors["expert_scales"][rank], dtype=np.float32)
    ws = dev(shard_w, "F32")
    kw = dict(shared_expert_num=ns, shared_expert_rank_num=S,
              quant_mode=int(p.get("quant_mode", 0)),
              expert_token_nums_type=int(p.get("expert_token_nums_type", 1)))
    if p.get("smooth"):
        kw["scales"] = dev(np.asarray(tensors["scales"], dtype=np.float32), "F32")
    mask = None
    if "x_active_mask" in tensors:
        mask = torch.from_numpy(np.asarray(tensors["x_active_mask"][rank]).astype(np.bool_)).npu()
        kw["x_active_mask"] = mask
    res = torch_npu.npu_moe_distribute_dispatch_v2(x, ids, hcom, W, rank, E, expert_scales=ws, **kw)
    expand_x, dyn, assist, nums_t, ep_recv, tp_recv = res[:6]
    nums = nums_t.cpu().numpy().astype(np.int64)
    counts = np.diff(np.concatenate([[0], nums])) if kw["expert_token_nums_type"] == 0 else nums
    n = int(counts.sum())
    # The expert step: one gain per local expert (shared ranks: their shared expert's).
    gains = cw.to_f32(tensors["expert_gain"], dtypes["expert_gain"])
    if rank < S:
        row_gain = np.full(n, gains[rank // (S // ns)], np.float32)
    else:
        row_gain = np.repeat(gains[ns + (rank - S) * L + np.arange(L)], counts).astype(np.float32)
    gain_t = dev(np.ascontiguousarray(row_gain.reshape(-1, 1)), "F32")
    rows = expand_x[:n].float()
    if kw["quant_mode"] == 2:
        rows = rows * dyn[:n].reshape(-1, 1)
    y = (rows * gain_t).to(torch.bfloat16 if dt == "BF16" else torch.float16)
    # The combine takes the dispatch's (A, H) layout: the expert rows first, zeros after.
    y_host = cw_bits(y.cpu(), dt)
    full = np.zeros((expand_x.shape[0], H), y_host.dtype)
    full[:n] = y_host
    y = dev(full, dt)
    combine_scales = ws
    ck = dict(tp_send_counts=tp_recv, shared_expert_num=ns, shared_expert_rank_num=S)
    if mask is not None:
        ck["x_active_mask"] = mask
    out = torch_npu.npu_moe_distribute_combine_v2(y, ids, assist, ep_recv, combine_scales, hcom,
                                                  W, rank, E, **ck)
    torch.npu.synchronize()
    ex = expand_x[:n].cpu()
    ex = ex.numpy() if kw["quant_mode"] == 2 else cw_bits(ex, dt)
    o = cw_bits(out[:active[rank]].cpu(), dt)
    t = {"expand_x": ex, "expert_token_nums": nums, "out": o}
    d = {"expand_x": "I8" if kw["quant_mode"] == 2 else dt, "expert_token_nums": "I64", "out": dt}
    if kw["quant_mode"] == 2:
        t["dynamic_scales"] = dyn[:n].cpu().numpy().astype(np.float32)
        d["dynamic_scales"] = "F32"
    cw.write_safetensors("%s.rank%d" % (a.outputs, rank), t, d)
    dist.destroy_process_group()


def cw_bits(t, dt):
    if dt == "BF16":
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


if __name__ == "__main__":
    main()

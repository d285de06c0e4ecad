"""One rank of an MC2 MatmulAllReduce case, launched by torchrun from worker.py.
Reads the case's inputs (x1 [R, M, K], x2 [R, K, N], optional bias [N] and x3 [M, N]), runs
npu_mm_all_reduce_base on its shard with the HCCL communicator (bias and x3 on rank 0 only),
and rank 0 writes `out`. With CONFORM_TIMING (the case's timing request as JSON) each rank
times its own calls with NPU events after a barrier and writes them to <outputs>.rank<r>.json;
the worker reports, per iteration, the slowest rank's time."""
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
import fia_args as fa  # noqa: E402


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
    tensors, dtypes, _ = cw.read_safetensors(a.inputs)
    t = fa.MC2_TENSORS
    x1, x2 = fa.mc2_shard(tensors[t["x1"]], tensors[t["x2"]], rank)
    dt = dtypes[t["x1"]]

    def dev(x, d):
        if d == "BF16":
            return torch.from_numpy(np.ascontiguousarray(x).view(np.int16)).view(torch.bfloat16).npu()
        return torch.from_numpy(np.ascontiguousarray(x)).npu()

    x1, x2 = dev(x1, dt), dev(x2, dt)
    # bias [N] and x3 [M, N] are one copy each that enters the sum once. The kernel computes
    # allreduce(x1 @ x2 + bias + x3) (aclnnMatmulAllReduceV2): every rank adds what it is
    # passed before the reduction, so they go to rank 0 only (as vLLM's RowParallelLinear
    # passes its bias on tensor-parallel rank 0 only); the other ranks pass None.
    epilogue_rank = rank == 0
    bias = dev(tensors[t["bias"]], dt) if epilogue_rank and t["bias"] in tensors else None
    x3 = dev(tensors[t["x3"]], dt) if epilogue_rank and t["x3"] in tensors else None

    def call():
        return torch_npu.npu_mm_all_reduce_base(x1, x2, hcom, reduce_op="sum", bias=bias, x3=x3)

    timing = json.loads(os.environ.get("CONFORM_TIMING") or "{}")
    times = []
    for _ in range(int(timing.get("warmup", 0))):
        call()
        torch.npu.synchronize()
    for _ in range(int(timing.get("iterations", 0))):
        # Every rank starts together; each times its own call on the device.
        dist.barrier()
        torch.npu.synchronize()
        start = torch.npu.Event(enable_timing=True)
        end = torch.npu.Event(enable_timing=True)
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)  # ms -> us
    out = call()
    torch.npu.synchronize()
    if timing:
        with open("%s.rank%d.json" % (a.outputs, rank), "w") as f:
            json.dump({"rank": rank, "timings_us": times}, f)
    if rank == 0:
        o = out.cpu()
        o = o.view(torch.int16).numpy().view(np.uint16) if dt == "BF16" else o.numpy()
        cw.write_safetensors(a.outputs, {t["out"]: o}, {t["out"]: dt})
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

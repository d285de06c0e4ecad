"""Side-by-side baseline for the attention reference bench (docs/PERFORMANCE.md).

onnxruntime CPU GroupQueryAttention (com.microsoft), f32, the prefill case of
reference/benches/attention.rs: B=1, Hq=32, Hkv=8, S=2048, D=128, causal (GQA is causal).
Reports the median wall time and the process CPU time per run, so figures taken on a loaded
machine can be compared by CPU seconds.

    python3 -m venv /tmp/ortvenv && /tmp/ortvenv/bin/pip install onnxruntime onnx numpy
    /tmp/ortvenv/bin/python docs/ort_gqa_bench.py [threads] [runs]
"""
import resource
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

B, HQ, HKV, S, D = 1, 32, 8, 2048, 128
threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 10

node = helper.make_node(
    "GroupQueryAttention",
    ["query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length"],
    ["output", "present_key", "present_value"],
    domain="com.microsoft",
    num_heads=HQ,
    kv_num_heads=HKV,
)
f = TensorProto.FLOAT
graph = helper.make_graph(
    [node],
    "gqa",
    [
        helper.make_tensor_value_info("query", f, [B, S, HQ * D]),
        helper.make_tensor_value_info("key", f, [B, S, HKV * D]),
        helper.make_tensor_value_info("value", f, [B, S, HKV * D]),
        helper.make_tensor_value_info("past_key", f, [B, HKV, 0, D]),
        helper.make_tensor_value_info("past_value", f, [B, HKV, 0, D]),
        helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [B]),
        helper.make_tensor_value_info("total_sequence_length", TensorProto.INT32, []),
    ],
    [
        helper.make_tensor_value_info("output", f, None),
        helper.make_tensor_value_info("present_key", f, None),
        helper.make_tensor_value_info("present_value", f, None),
    ],
)
model = helper.make_model(
    graph,
    opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
)
model.ir_version = 10
so = ort.SessionOptions()
so.intra_op_num_threads = threads
so.inter_op_num_threads = 1
sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
rng = np.random.default_rng(0)
feeds = {
    "query": rng.uniform(-1, 1, (B, S, HQ * D)).astype(np.float32),
    "key": rng.uniform(-1, 1, (B, S, HKV * D)).astype(np.float32),
    "value": rng.uniform(-1, 1, (B, S, HKV * D)).astype(np.float32),
    "past_key": np.zeros((B, HKV, 0, D), np.float32),
    "past_value": np.zeros((B, HKV, 0, D), np.float32),
    "seqlens_k": np.full((B,), S - 1, np.int32),
    "total_sequence_length": np.array(S, np.int32),
}
sess.run(None, feeds)  # warm-up
walls, cpus = [], []
for _ in range(runs):
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    sess.run(None, feeds)
    walls.append(time.perf_counter() - t0)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpus.append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
walls.sort()
cpus.sort()
print(f"onnxruntime {ort.__version__} GQA f32 B={B} Hq={HQ} Hkv={HKV} S={S} D={D} "
      f"threads={threads}: median wall {walls[len(walls)//2]:.3f} s, "
      f"min wall {walls[0]:.3f} s, median CPU {cpus[len(cpus)//2]:.3f} s")

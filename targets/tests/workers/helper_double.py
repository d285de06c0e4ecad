"""A well-behaved worker built on conform_worker (numpy): `double` (y = 2 * x) for F32, F16
and BF16, plus `double_partial` which writes only the first half (the rest stays poisoned), and
`copy` (y = x) for the protocol benchmarks."""
import os

import numpy as np

import conform_worker as cw


def double(case):
    x = case.inputs["x"]
    dt = case.input_dtypes["x"]
    y = cw.from_f32(cw.to_f32(x, dt) * 2.0, dt)
    return {"y": y}


def double_partial(case):
    x = case.inputs["x"].reshape(-1)
    y = case.outputs["y"].reshape(-1)
    half = x.shape[0] // 2
    y[:half] = (x[:half] * 2.0).astype(y.dtype)


def copy(case):
    """y = x: measures protocol and transfer cost without compute."""
    return {"y": case.inputs["x"]}


def noisy(case):
    """Prints to stdout (as libraries do): the helper must route it to stderr."""
    print("loading kernels... (stdout noise)")
    os.write(1, b"raw fd-1 noise\n")
    return double(case)


def timed_double(case):
    x = case.inputs["x"]
    return {"y": case.time(lambda: (x * 2.0).astype(x.dtype))}


cw.serve(
    name="helper_double",
    version="1",
    ops={"double": double, "double_partial": double_partial, "timed_double": timed_double,
         "copy": copy, "noisy": noisy},
    capabilities={"ops": {"double": {}, "double_partial": {}, "timed_double": {}, "copy": {}, "noisy": {}}},
    libraries={"numpy": np.__version__},
    device="CPU (test)",
)

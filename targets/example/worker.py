"""Example worker: MXFP4 -> BF16/F16/F32 dequant in plain numpy. Copy this file, replace the
body of `dequant` with a call into your kernel, and list what it supports in CAPABILITIES."""
import numpy as np

import conform_worker as cw

E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def dequant(case):
    packed = case.inputs["weight"]                      # U8 [N, K/2], low nibble first
    codes = np.stack([packed & 15, packed >> 4], -1).reshape(packed.shape[0], -1)
    e = case.inputs["scale"].astype(np.int32)           # U8 E8M0 [N, K/32]
    with np.errstate(over="ignore"):
        scale = np.where(e == 255, np.nan, np.ldexp(np.float32(1), e - 127)).astype(np.float32)
    y = E2M1[codes] * np.repeat(scale, 32, axis=1)      # exact in f32
    out_dtype = case.output_dtypes["out"]               # "BF16", "F16" or "F32"
    return {"out": cw.from_f32(y, out_dtype)}           # one rounding, nearest-even


CAPABILITIES = {"ops": {"mxfp4_dequant": {
    "dtypes": ["bf16", "f16", "f32"],
    "limits": {"packing": {"one_of": ["low_first"]}, "element": {"one_of": ["e2m1"]}},
    "recipes": ["mx_ocp"],
}}}

if __name__ == "__main__":
    cw.serve(name="example", version="0.1", ops={"mxfp4_dequant": dequant},
             capabilities=CAPABILITIES, libraries={"numpy": np.__version__}, device="CPU")

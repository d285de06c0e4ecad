"""ml_dtypes worker: FP4 E2M1 decode, MXFP4 and NVFP4 dequant, BF16 casts, all through
ml_dtypes' own dtypes (float4_e2m1fn, float8_e8m0fnu, float8_e4m3fn, bfloat16).

Recipes it implements, declared honestly:
- mxfp4_dequant `mx_ocp`: code -> f32 (exact), scale 2^(e-127) -> f32 (exact), product in f32
  (exact unless the f32 range is left), ONE rounding to the output dtype, round to nearest
  even (ml_dtypes' cast); NaN scale -> NaN group.
- nvfp4_dequant `vllm_nvfp4`: order B, q * (s * g) in f32, then ONE rounding (RNE).
"""
import sys

import conform_worker as cw

try:
    import ml_dtypes
    import numpy as np

    import conform_fp4 as f4
except Exception as e:
    cw.unavailable("import failed: %s" % e)

BF16 = ml_dtypes.bfloat16


def decode_codes(packed, packing):
    codes = f4.unpack(packed, packing)
    return codes.view(ml_dtypes.float4_e2m1fn).astype(np.float32)


def to_output(y32, dtype):
    """One rounding, RNE, from f32 to the output's storage (BF16 as bits)."""
    if dtype == "BF16":
        return y32.astype(BF16).view(np.uint16)
    if dtype == "F16":
        return y32.astype(np.float16)
    if dtype == "F32":
        return y32.astype(np.float32)
    raise cw.Unsupported("output dtype %s" % dtype)


def mxfp4(case):
    t = f4.TENSORS["mxfp4_dequant"]
    p = case.params
    q = decode_codes(case.inputs[t["codes"]], p.get("packing", "low_first"))
    s = case.inputs[t["scale"]].view(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    with np.errstate(over="ignore"):
        y = q * f4.group_scale(s, q.shape[-1], int(p.get("group_size", 32)))
    return {t["out"]: to_output(y, case.output_dtypes[t["out"]])}


def nvfp4(case):
    t = f4.TENSORS["nvfp4_dequant"]
    p = case.params
    q = decode_codes(case.inputs[t["codes"]], p.get("packing", "low_first"))
    s = case.inputs[t["scale"]].view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    g = case.inputs[t["global"]].astype(np.float32).reshape(())
    sg = (s * g).astype(np.float32)  # order B: the scales first
    y = q * f4.group_scale(sg, q.shape[-1], int(p.get("group_size", 16)))
    return {t["out"]: to_output(y, case.output_dtypes[t["out"]])}


if __name__ == "__main__":
    cw.serve(
        name="ml_dtypes",
        version="1",
        ops={"mxfp4_dequant": mxfp4, "nvfp4_dequant": nvfp4},
        capabilities={"ops": {
            "mxfp4_dequant": {"dtypes": ["bf16", "f16", "f32"], "recipes": ["mx_ocp"],
                              "limits": {"packing": {"one_of": ["low_first", "high_first"]},
                                         "element": {"one_of": ["e2m1"]}},
                              "notes": "f32 product (exact), one RNE rounding via ml_dtypes"},
            "nvfp4_dequant": {"dtypes": ["bf16", "f16", "f32"], "recipes": ["vllm_nvfp4"],
                              "limits": {"packing": {"one_of": ["low_first", "high_first"]},
                                         "element": {"one_of": ["e2m1"]}},
                              "notes": "order B: q * (s * g) in f32, one RNE rounding"},
        }},
        libraries={"ml_dtypes": ml_dtypes.__version__, "numpy": np.__version__,
                   "python": sys.version.split()[0]},
        device="CPU (ml_dtypes %s)" % ml_dtypes.__version__,
    )

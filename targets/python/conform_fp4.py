"""FP4 plumbing shared by the CPU workers (numpy only): the tensor and parameter names of the
FP4 ops (one table, so alignment with the reference is easy), nibble unpacking, and
table-driven decoders used by the numpy worker (the ml_dtypes worker decodes through
ml_dtypes instead).

Packing: two E2M1 codes per byte, low nibble first (PyTorch float4_e2m1fn_x2, ONNX, vLLM);
`packing = "high_first"` swaps. Scales: MXFP4 E8M0 (U8, 2^(e-127), 0xFF = NaN) per group of
32 along K; NVFP4 E4M3 (U8 bits) per group of 16 along K times an F32 global scale.
"""

import numpy as np

# op -> tensor names (inputs, outputs) and parameter names.
TENSORS = {
    "mxfp4_dequant": {"codes": "weight", "scale": "scale", "out": "out"},
    "nvfp4_dequant": {"codes": "weight", "scale": "block_scale", "global": "global_scale",
                      "out": "out"},
    "w4a16_matmul": {"x": "x", "codes": "weight", "scale": "scale", "global": "global_scale",
                     "out": "y"},
}
PARAMS = {"dtype": "output dtype (bf16 | f16 | f32)", "n": "rows of W", "k": "reduction length",
          "m": "rows of X (w4a16)", "group_size": "32 (MX) / 16 (NV)",
          "packing": "low_first | high_first", "format": "w4a16: mxfp4 | nvfp4"}

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float32)


def unpack(packed, packing="low_first"):
    """U8 [..., K/2] -> codes U8 [..., K]."""
    lo = packed & 0x0F
    hi = packed >> 4
    first, second = (lo, hi) if packing == "low_first" else (hi, lo)
    return np.stack([first, second], axis=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def e8m0_to_f32(e):
    e = e.astype(np.int32)
    with np.errstate(over="ignore"):
        out = np.ldexp(np.float32(1.0), e - 127).astype(np.float32)
    return np.where(e == 255, np.float32(np.nan), out).astype(np.float32)


def _e4m3_table():
    t = np.zeros(256, dtype=np.float32)
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e = (b >> 3) & 0xF
        m = b & 7
        if e == 0xF and m == 7:
            t[b] = np.nan
        elif e == 0:
            t[b] = s * m / 8.0 * 2.0 ** -6
        else:
            t[b] = s * (1 + m / 8.0) * 2.0 ** (e - 7)
    return t


E4M3 = _e4m3_table()


def group_scale(scale, k, group):
    """[N, K/group] -> [N, K] by repetition."""
    return np.repeat(scale, group, axis=-1)[..., :k]

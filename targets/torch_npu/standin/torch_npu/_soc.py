"""Which product family a SoC name belongs to, for the stand-in's device differences.

Names as torch.npu.get_device_name returns them (the SocVersion list of Ascend/pytorch,
torch_npu/csrc/core/npu/NpuVariables.h): the first-generation training parts Ascend910A,
Ascend910B, Ascend910ProA, Ascend910ProB, Ascend910PremiumA; Atlas A2 Ascend910B1..B4
(B2C, B4-1); Atlas A3 Ascend910_93xx; Ascend310P*, Ascend310B*; Ascend950 (also spelt
Ascend910_95xx). Matched whole, never by prefix: "Ascend910B" is a first-generation part
and "Ascend910B4" an A2 one.
"""
import re

_FAMILIES = (
    ("A2", re.compile(r"^Ascend910B[1-4](C|-1)?$")),
    ("A3", re.compile(r"^Ascend910_93\d\d$")),
    ("950", re.compile(r"^(Ascend950(PR|DT)?(_\w+)?|Ascend910_95\w*)$")),
    ("910", re.compile(r"^Ascend910(A|B|ProA|ProB|PremiumA)$")),
    ("310P", re.compile(r"^Ascend310P\d$")),
    ("310B", re.compile(r"^Ascend310B\d$")),
)


def family(name):
    name = (name or "").strip()
    for fam, rx in _FAMILIES:
        if rx.match(name):
            return fam
    return None

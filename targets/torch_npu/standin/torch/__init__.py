"""conform CPU stand-in for the part of `torch` the torch_npu worker uses (tests only; see
../README.md). Tensors are numpy arrays with a dtype tag and a device name; BF16 is held as its
16-bit patterns. Like torch, it refuses `.numpy()` on a device tensor or on BF16, and
arithmetic across devices, so a worker that forgets a `.cpu()` or a `.view()` fails here too."""
import os
import sys
import time as _time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _guard  # noqa: E402

_guard.refuse_if_real("torch")

import numpy as _np  # noqa: E402

__version__ = "0.0+conform.standin"
STANDIN = True


class dtype:
    def __init__(self, name, storage, itemsize):
        self.name, self.storage, self.itemsize = name, _np.dtype(storage), itemsize

    def __repr__(self):
        return "torch." + self.name


float32 = dtype("float32", _np.float32, 4)
float16 = dtype("float16", _np.float16, 2)
bfloat16 = dtype("bfloat16", _np.uint16, 2)
int8 = dtype("int8", _np.int8, 1)
int16 = dtype("int16", _np.int16, 2)
int32 = dtype("int32", _np.int32, 4)
int64 = dtype("int64", _np.int64, 8)
uint8 = dtype("uint8", _np.uint8, 1)
bool = dtype("bool", _np.bool_, 1)  # noqa: A001  (torch.bool)
_FROM_NUMPY = {_np.dtype(d.storage): d for d in (float32, float16, int8, int16, int32, int64, uint8,
                                                 bool)}


class device:
    def __init__(self, kind, index=None):
        self.type = str(kind).split(":")[0]
        self.index = index

    def __repr__(self):
        return "device(%s)" % self.type


def _bf16_to_f32(bits):
    return (bits.astype(_np.uint32) << 16).view(_np.float32)


def _f32_to_bf16(x):
    x = _np.ascontiguousarray(x, dtype=_np.float32)
    u = x.view(_np.uint32).astype(_np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(_np.uint16)
    return _np.where(_np.isnan(x), ((u >> 16) | 0x40).astype(_np.uint16), r)


class Tensor:
    def __init__(self, array, dt, dev="cpu"):
        self._a = array
        self.dtype = dt
        self.device = device(dev)

    @property
    def shape(self):
        return tuple(self._a.shape)

    def dim(self):
        return self._a.ndim

    def _f32(self):
        if self.dtype is bfloat16:
            return _bf16_to_f32(self._a)
        return self._a.astype(_np.float32)

    def view(self, dt):
        if dt.itemsize != self.dtype.itemsize:
            raise RuntimeError("stand-in: view from %s to %s changes the element size"
                               % (self.dtype, dt))
        return Tensor(self._a.view(dt.storage), dt, self.device.type)

    def to(self, target):
        if isinstance(target, dtype):
            if target is self.dtype:
                return self
            x = self._f32()
            a = _f32_to_bf16(x) if target is bfloat16 else x.astype(target.storage)
            return Tensor(a, target, self.device.type)
        kind = target.type if isinstance(target, device) else str(target).split(":")[0]
        if kind not in ("cpu", "npu"):
            raise RuntimeError("stand-in: no device %s" % target)
        return Tensor(self._a.copy(), self.dtype, kind)

    def npu(self):
        return self.to("npu")

    def cpu(self):
        return self.to("cpu")

    def detach(self):
        return self

    def contiguous(self):
        return self

    def float(self):
        return self.to(float32)

    def numpy(self):
        if self.device.type != "cpu":
            raise TypeError("can't convert %s device type tensor to numpy. Use Tensor.cpu() to "
                            "copy the tensor to host memory first." % self.device.type)
        if self.dtype is bfloat16:
            raise TypeError("Got unsupported ScalarType BFloat16")
        return self._a

    def _binary(self, other, op, what):
        """An elementwise op as torch computes it: the result dtype by torch's promotion
        (two tensors of one 16-bit dtype stay in it; with a float32 tensor it is float32), the
        value computed in float32 and rounded once (RNE) to the result dtype."""
        if not isinstance(other, Tensor):
            raise RuntimeError("stand-in: %s with a Python scalar is not modelled" % what)
        if other.device.type != self.device.type:
            raise RuntimeError("Expected all tensors to be on the same device, but found at "
                               "least two devices, %s and %s!" % (self.device.type,
                                                                 other.device.type))
        floats = (float32, float16, bfloat16)
        if self.dtype not in floats or other.dtype not in floats:
            raise RuntimeError("stand-in: %s of %s and %s is not modelled"
                               % (what, self.dtype, other.dtype))
        if self.dtype is other.dtype:
            out = self.dtype
        elif float32 in (self.dtype, other.dtype):
            out = float32
        else:
            raise RuntimeError("stand-in: %s of float16 and bfloat16 is not modelled" % what)
        r = Tensor(op(self._f32(), other._f32()).astype(_np.float32), float32,
                   self.device.type)
        return r.to(out)

    def __mul__(self, other):
        if not isinstance(other, Tensor):
            return Tensor(self._f32() * _np.float32(other), float32, self.device.type)
        if self.dtype is float32 and other.dtype is float32:
            if other.device.type != self.device.type:
                raise RuntimeError("Expected all tensors to be on the same device, but found "
                                   "at least two devices, %s and %s!" % (self.device.type,
                                                                        other.device.type))
            return Tensor(self._a * other._a, float32, self.device.type)
        return self._binary(other, _np.multiply, "multiplication")

    __rmul__ = __mul__

    def __sub__(self, other):
        return self._binary(other, _np.subtract, "subtraction")

    def __add__(self, other):
        return self._binary(other, _np.add, "addition")

    def __rtruediv__(self, other):
        """scalar / tensor: a float32 division rounded to the tensor's dtype."""
        if isinstance(other, Tensor) or self.dtype not in (float32, float16, bfloat16):
            raise RuntimeError("stand-in: only a Python number divided by a float tensor is "
                               "modelled")
        with _np.errstate(divide="ignore"):
            q = (_np.float32(other) / self._f32()).astype(_np.float32)
        return Tensor(q, float32, self.device.type).to(self.dtype)

    def __getitem__(self, index):
        return Tensor(_np.ascontiguousarray(self._a[index]), self.dtype, self.device.type)

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return Tensor(self._a.reshape(shape), self.dtype, self.device.type)


def round(t):  # noqa: A001  (torch.round)
    """Round half to even, in the tensor's dtype (exact: integers of a float dtype's range are
    representable where rounding changes anything)."""
    if t.dtype not in (float32, float16, bfloat16):
        raise RuntimeError("stand-in: round of %s" % t.dtype)
    return Tensor(_np.rint(t._f32()).astype(_np.float32), float32, t.device.type).to(t.dtype)


def clamp(t, min=None, max=None):  # noqa: A002
    if t.dtype not in (float32, float16, bfloat16):
        raise RuntimeError("stand-in: clamp of %s" % t.dtype)
    v = t._f32()
    lo = -_np.inf if min is None else min
    hi = _np.inf if max is None else max
    return Tensor(_np.clip(v, lo, hi).astype(_np.float32), float32, t.device.type).to(t.dtype)


def from_numpy(a):
    a = _np.asarray(a)
    if a.dtype not in _FROM_NUMPY:
        raise TypeError("stand-in: from_numpy of %s" % a.dtype)
    return Tensor(a, _FROM_NUMPY[a.dtype])


def zeros(*shape, dtype=float32):  # noqa: A002
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return Tensor(_np.zeros(shape, dtype=dtype.storage), dtype)


class _Event:
    def __init__(self, enable_timing=False):
        self.t = None

    def record(self, stream=None):
        self.t = _time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.t - self.t) * 1e3  # milliseconds, as torch events report


class _Npu:
    """`torch.npu` (what torch_npu registers), on the host. The simulated product is
    CONFORM_STANDIN_SOC (a SoC name as torch.npu.get_device_name returns it, default an
    Atlas A2 one) and the number of devices CONFORM_STANDIN_DEVICES (default 8)."""

    Event = _Event

    @staticmethod
    def synchronize(device=None):
        pass

    @staticmethod
    def set_device(index):
        pass

    @staticmethod
    def get_device_name(index=0):
        return os.environ.get("CONFORM_STANDIN_SOC") or "Ascend910B4"

    @staticmethod
    def device_count():
        return int(os.environ.get("CONFORM_STANDIN_DEVICES", "8"))

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def memory_allocated(device=None):
        return 0


npu = _Npu()

from . import distributed  # noqa: E402,F401

"""conform worker helper: the protocol loop of targets/PROTOCOL.md, so a worker is a dict of
op name -> function.

Standard library + numpy only (safetensors files are read and written here directly: an
8-byte little-endian header length, a JSON header, raw little-endian data). BF16 tensors are
handed to ops as raw ``uint16`` bit patterns (numpy has no bfloat16); use
``bf16_bits_to_f32`` / ``f32_to_bf16_bits``. FP4 codes and E8M0 scales are U8.

A worker::

    import conform_worker as cw

    def dequant(case):
        codes = case.inputs["x"]            # numpy arrays, by the op's input names
        ...
        return {"y": y}                     # or write into case.outputs["y"][...]

    cw.serve(name="my_kernel", version="0.1", ops={"mxfp4_dequant": dequant},
             capabilities={"ops": {"mxfp4_dequant": {"dtypes": ["bf16"]}}},
             libraries={"numpy": np.__version__}, device="CPU")

Outputs arrive pre-filled with the poison pattern (``POISON``) read from the output file, so
an element the op does not write stays poisoned and fails the verdict. Returned arrays must
have the output's exact dtype and shape (no silent casts). While an op runs, anything printed
to stdout goes to stderr: the protocol owns the real stdout.
"""

import json
import os
import sys
import time
import traceback

PROTOCOL_VERSION = 1

try:
    import numpy as np
except Exception as _e:  # pragma: no cover - exercised by workers in a bare interpreter
    np = None
    _NUMPY_ERROR = "import numpy failed: %s" % _e
else:
    _NUMPY_ERROR = None

# The poison pattern per safetensors dtype (bits). A copy of targets/src/poison.rs (the one
# home); `cargo test -p conform-targets` fails when the two differ (python_helper_poison_table_matches).
POISON = {
    "BF16": 0x7FA5,
    "F16": 0x7DA5,
    "F32": 0x7FA5A5A5,
    "F64": 0x7FF4A5A5A5A5A5A5,
    "U8": 0xA5,
    "I8": 0xA5,
    "I32": 0xA5A5A5A5,
    "I64": 0xA5A5A5A5A5A5A5A5,
}

# safetensors dtype -> (numpy dtype of the array handed to ops, storage dtype, element size).
_NP = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",
    "U8": "u1",
    "I32": "<i4",
    "I64": "<i8",
    "I8": "i1",
    "U16": "<u2",
    "BOOL": "?",
}
_ALIGN_ORDER = ["F64", "I64", "F32", "I32", "F16", "BF16", "U16", "U8", "I8", "BOOL"]


class Unsupported(Exception):
    """Raise from an op: this case is outside what the kernel supports (recorded `skipped`)."""


class ProtocolError(Exception):
    pass


# --------------------------------------------------------------------------- safetensors


def read_header(path):
    """(header dict without __metadata__, metadata, data start offset) of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ProtocolError("%s: truncated header" % path)
        n = int.from_bytes(raw, "little")
        header = json.loads(f.read(n).decode("utf-8"))
    meta = header.pop("__metadata__", None) or {}
    return header, meta, 8 + n


def _map(path):
    """The file's bytes as a read-only array over a populated shared mapping (one call maps
    every page: far cheaper than a page fault per page)."""
    import mmap as _mmap
    size = os.path.getsize(path)
    if size == 0:
        return np.zeros(0, dtype=np.uint8)
    fd = os.open(path, os.O_RDONLY)
    try:
        flags = _mmap.MAP_SHARED | getattr(_mmap, "MAP_POPULATE", 0)
        m = _mmap.mmap(fd, size, flags=flags, prot=_mmap.PROT_READ)
    finally:
        os.close(fd)
    return np.frombuffer(m, dtype=np.uint8)


def read_safetensors(path, mmap=False):
    """Returns (tensors: name -> numpy array, dtypes: name -> safetensors dtype, metadata).
    With `mmap`, arrays are read-only views of the mapped file (no copy)."""
    header, meta, start = read_header(path)
    if mmap:
        data = _map(path)[start:]
    else:
        with open(path, "rb") as f:
            f.seek(start)
            data = np.fromfile(f, dtype=np.uint8)
    tensors, dtypes = {}, {}
    for name, info in header.items():
        dt = info["dtype"]
        if dt not in _NP:
            raise ProtocolError("%s: tensor %s: unsupported dtype %s" % (path, name, dt))
        s, e = info["data_offsets"]
        shape = tuple(info["shape"])
        tensors[name] = data[s:e].view(_NP[dt]).reshape(shape)
        dtypes[name] = dt
    return tensors, dtypes, meta


def write_safetensors(path, tensors, dtypes, metadata=None):
    """Writes name -> array with the given safetensors dtypes, atomically (tmp + rename)."""
    names = sorted(tensors, key=lambda k: (_ALIGN_ORDER.index(dtypes[k]), k))
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    arrays = []
    for k in names:
        a = np.ascontiguousarray(tensors[k], dtype=_NP[dtypes[k]])
        header[k] = {
            "dtype": dtypes[k],
            "shape": list(a.shape),
            "data_offsets": [offset, offset + a.nbytes],
        }
        offset += a.nbytes
        arrays.append(a)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = "%s.tmp%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for a in arrays:
            f.write(memoryview(a.reshape(-1)).cast("B"))
    os.replace(tmp, path)


def write_into(path, tensors):
    """Overwrites the data of tensors in an existing safetensors file in place (the header
    must already describe them with the same dtype and shape). Writing into the pre-filled
    output file avoids allocating a second file's pages."""
    header, _, start = read_header(path)
    with open(path, "r+b") as f:
        for name, a in tensors.items():
            info = header[name]
            a = np.ascontiguousarray(a, dtype=_NP[info["dtype"]])
            s, e = info["data_offsets"]
            if tuple(info["shape"]) != a.shape or e - s != a.nbytes:
                raise ProtocolError("%s: `%s` does not match the file's header" % (path, name))
            f.seek(start + s)
            f.write(memoryview(a.reshape(-1)).cast("B"))


# --------------------------------------------------------------------------- numerics helpers


def bf16_bits_to_f32(bits):
    """Raw BF16 bits (uint16) -> float32, exact."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """float32 -> BF16 bits, round to nearest even; NaN stays NaN (quiet)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    u = x.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        rounded = np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), rounded)
    return rounded


def to_f32(arr, dtype):
    """Any float tensor as handed to ops (BF16 as bits) -> float32, exact."""
    if dtype == "BF16":
        return bf16_bits_to_f32(arr)
    return np.asarray(arr).astype(np.float32)


def from_f32(x, dtype):
    """float32 -> the storage of `dtype` (one rounding, RNE)."""
    if dtype == "BF16":
        return f32_to_bf16_bits(x)
    return np.asarray(x, dtype=np.float32).astype(_NP[dtype])


def poisoned(shape, dtype):
    """An array of `shape` filled with the poison pattern of safetensors dtype `dtype`."""
    bits = {1: "u1", 2: "<u2", 4: "<u4", 8: "<u8"}[np.dtype(_NP[dtype]).itemsize]
    return np.full(shape, POISON[dtype], dtype=bits).view(_NP[dtype])


# --------------------------------------------------------------------------- the case


class Case:
    """One request: params, inputs, poisoned outputs, and the timing request."""

    def __init__(self, msg):
        self.id = msg["id"]
        self.case_id = msg.get("case_id", "")
        self.input_set = msg.get("input_set", 0)
        self.op = msg["op"]
        self.params = msg.get("params") or {}
        self.recipe = msg.get("recipe")
        self.timing = msg.get("timing")
        self.inputs_path = msg["inputs"]
        self.outputs_path = msg["outputs"]
        # Inputs: read-only views of the mapped input file (no copy).
        self.inputs, self.input_dtypes, _ = read_safetensors(self.inputs_path, mmap=True)
        header, _, _ = read_header(self.outputs_path)
        self.output_dtypes = {k: v["dtype"] for k, v in header.items()}
        self.output_shapes = {k: tuple(v["shape"]) for k, v in header.items()}
        self._outputs = None
        self._returned = {}
        self.notes = []
        self.timings_us = None
        # Process CPU time per timed iteration (microseconds), beside the wall clock, when
        # the wall clock is what was timed (never with a device timer).
        self.cpu_us = None
        self.setup_us = None

    @property
    def outputs(self):
        """Writable output arrays, starting poisoned (read from the pre-filled output file on
        first use)."""
        if self._outputs is None:
            outs, _, _ = read_safetensors(self.outputs_path)
            self._outputs = {k: np.array(v) for k, v in outs.items()}
        return self._outputs

    def note(self, text):
        self.notes.append(str(text))

    def time(self, fn, sync=None, timer=None):
        """Runs `fn()` warm-up + iterations times when timing was requested (once otherwise)
        and records per-iteration microseconds. `sync()` is called after each run (e.g.
        torch.cuda.synchronize); `timer(fn)` may replace the wall clock and return
        microseconds (e.g. CUDA events / device timers). Returns the last result."""
        t = self.timing
        if not t:
            r = fn()
            if sync:
                sync()
            return r
        r = None
        for _ in range(int(t.get("warmup", 0))):
            r = fn()
            if sync:
                sync()
        times = []
        cpu = []
        for _ in range(int(t.get("iterations", 0))):
            if timer is not None:
                us = timer(fn)
            else:
                c0 = time.process_time_ns()
                t0 = time.perf_counter_ns()
                r = fn()
                if sync:
                    sync()
                us = (time.perf_counter_ns() - t0) / 1e3
                cpu.append((time.process_time_ns() - c0) / 1e3)
            times.append(float(us))
        self.timings_us = times
        self.cpu_us = cpu if timer is None else None
        if r is None:
            r = fn()
        return r

    def store(self, name, value):
        """Sets output `name` to `value`, checking dtype and shape exactly."""
        if name not in self.output_dtypes:
            raise ProtocolError(
                "op returned `%s`, not an output of %s (outputs: %s)"
                % (name, self.op, ", ".join(sorted(self.output_dtypes)))
            )
        want = np.dtype(_NP[self.output_dtypes[name]])
        value = np.asarray(value)
        if value.dtype != want:
            raise ProtocolError(
                "output `%s`: op returned %s, expected %s (%s)"
                % (name, value.dtype, want, self.output_dtypes[name])
            )
        if value.shape != self.output_shapes[name]:
            raise ProtocolError(
                "output `%s`: op returned shape %s, expected %s"
                % (name, value.shape, self.output_shapes[name])
            )
        if self._outputs is not None:
            self._outputs[name][...] = value
        else:
            self._returned[name] = value

    def final_outputs(self):
        """Every output: returned arrays, else the (possibly op-written) poisoned buffers."""
        if all(k in self._returned for k in self.output_dtypes):
            return self._returned
        outs = dict(self.outputs)
        outs.update(self._returned)
        return outs


# --------------------------------------------------------------------------- the loop


class _Channel:
    """The protocol's stdout; the process's fd 1 is redirected to stderr."""

    def __init__(self):
        fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self._out = os.fdopen(fd, "w", buffering=1)

    def send(self, msg):
        self._out.write(json.dumps(msg, separators=(",", ":")) + "\n")
        self._out.flush()


def unavailable(reason):
    """Writes the `unavailable` handshake and exits 0 (e.g. an import failed)."""
    ch = _Channel()
    ch.send({"type": "unavailable", "protocol": PROTOCOL_VERSION, "reason": str(reason)})
    sys.exit(0)


def _run_one(ops, msg):
    case = Case(msg)
    fn = ops.get(case.op)
    if fn is None:
        raise Unsupported("this worker does not implement `%s`" % case.op)
    if case.timing and case.timings_us is None:
        # The op may time itself through case.time(); otherwise time the whole call.
        result = None
        t = case.timing
        wall = []
        cpu = []
        for i in range(int(t.get("warmup", 0)) + int(t.get("iterations", 0))):
            case.timings_us = None
            c0 = time.process_time_ns()
            t0 = time.perf_counter_ns()
            result = fn(case)
            dt = (time.perf_counter_ns() - t0) / 1e3
            dc = (time.process_time_ns() - c0) / 1e3
            if case.timings_us is not None:
                break  # the op timed itself
            if i >= int(t.get("warmup", 0)):
                wall.append(dt)
                cpu.append(dc)
        if case.timings_us is None:
            case.timings_us = wall
            case.cpu_us = cpu
            case.note("timings: wall time of the whole op call in the worker")
    else:
        result = fn(case)
    if result:
        for name, value in result.items():
            case.store(name, value)
    # The output file already holds every output (poisoned): overwrite the data in place.
    write_into(case.outputs_path, case.final_outputs())
    reply = {
        "type": "result",
        "id": case.id,
        "status": "ok",
        "outputs": case.outputs_path,
        "timings_us": case.timings_us or [],
        "setup_us": case.setup_us,
        "notes": case.notes,
    }
    if case.cpu_us and len(case.cpu_us) == len(reply["timings_us"]):
        reply["cpu_us"] = case.cpu_us
    return reply


def serve(name, version, ops, capabilities, libraries=None, device="CPU"):
    """Handshake, then answer requests until `shutdown` or end of input."""
    if _NUMPY_ERROR:
        unavailable(_NUMPY_ERROR)
    ch = _Channel()
    ch.send(
        {
            "type": "hello",
            "protocol": PROTOCOL_VERSION,
            "worker": {"name": name, "version": version},
            "libraries": {k: str(v) for k, v in (libraries or {}).items()},
            "device": device,
            "capabilities": capabilities,
        }
    )
    stdin = sys.stdin
    while True:
        line = stdin.readline()
        if not line:
            return
        line = line.strip()
        if not line:
            continue
        msg = json.loads(line)
        kind = msg.get("type")
        if kind == "shutdown":
            return
        if kind != "run":
            print("conform_worker: ignoring message of type %r" % kind, file=sys.stderr)
            continue
        try:
            reply = _run_one(ops, msg)
        except Unsupported as e:
            reply = {"type": "result", "id": msg.get("id"), "status": "unsupported",
                     "message": str(e)}
        except Exception as e:  # the op raised: report it, keep serving
            traceback.print_exc(file=sys.stderr)
            reply = {"type": "result", "id": msg.get("id"), "status": "error",
                     "message": "%s: %s" % (type(e).__name__, e)}
        ch.send(reply)

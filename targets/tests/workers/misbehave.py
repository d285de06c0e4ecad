"""A deliberately misbehaving worker for targets/tests/worker_misbehaving.rs (stdlib only).

It implements one op, `double` (y = 2 * x, F32), correctly, unless told otherwise:
- by argv[1] (start-up behaviour): `no_handshake` (never says hello), `unavailable`,
  `bad_version`, `cached` (answers every request with the outputs of its first one),
  `stdout_noise` (prints to stdout, breaking the protocol), `good`;
- by the case id of a request (per-case behaviour): contains `hang` (sleeps), `crash` (exit 3
  with a message on stderr), `segv` (killed by SIGSEGV), `malformed` (a non-JSON line),
  `missing` (no output `y`), `wrong_shape`, `wrong_dtype`, `error` (reports an error),
  `wrong_id`, `partial` (writes only the first element; the rest stays poisoned),
  `wrong_outputs_path` (names another output file), `wrong_timings` (one time too many),
  `negative_time` (a time below zero).
"""
import json
import os
import signal
import struct
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "good"


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def read_st(path):
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        s, e = info["data_offsets"]
        out[name] = (info["dtype"], info["shape"], data[s:e])
    return out


def write_st(path, tensors):
    header, blobs, off = {}, [], 0
    for name, (dtype, shape, raw) in sorted(tensors.items()):
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little") + h + b"".join(blobs))


def double(raw):
    n = len(raw) // 4
    return struct.pack("<%df" % n, *[2.0 * v for v in struct.unpack("<%df" % n, raw)])


if MODE == "no_handshake":
    time.sleep(3600)
if MODE == "unavailable":
    send({"type": "unavailable", "protocol": 1, "reason": "import fancy_kernels failed: no module"})
    sys.exit(0)
send({
    "type": "hello",
    "protocol": 99 if MODE == "bad_version" else 1,
    "worker": {"name": "misbehave", "version": MODE},
    "libraries": {"python": sys.version.split()[0]},
    "device": "CPU (test)",
    "capabilities": {"ops": {"double": {"dtypes": ["f32"], "recipes": ["plain"]}}},
})
first = None
for line in sys.stdin:
    msg = json.loads(line)
    if msg["type"] == "shutdown":
        break
    cid = msg["case_id"]
    if "hang" in cid:
        print("about to hang", file=sys.stderr, flush=True)
        time.sleep(3600)
    if "crash" in cid:
        print("simulated kernel failure: device lost", file=sys.stderr, flush=True)
        sys.exit(3)
    if "segv" in cid:
        print("about to segfault", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)
    if "malformed" in cid:
        sys.stdout.write("{this is not json\n")
        sys.stdout.flush()
        continue
    if MODE == "stdout_noise":
        print("loading kernels...")
    inputs = read_st(msg["inputs"])
    outs = read_st(msg["outputs"])
    dtype, shape, raw = inputs["x"]
    y = double(raw)
    if MODE == "cached":
        if first is None:
            first = y
        y = first
    result = {"y": ("F32", shape, y)}
    if "missing" in cid:
        result = {}
    elif "wrong_shape" in cid:
        result = {"y": ("F32", [len(y) // 4, 1], y)}
    elif "wrong_dtype" in cid:
        result = {"y": ("F64", shape, struct.pack("<%dd" % (len(y) // 4), *struct.unpack("<%df" % (len(y) // 4), y)))}
    elif "partial" in cid:
        result = {"y": ("F32", shape, y[:4] + outs["y"][2][4:])}
    write_st(msg["outputs"], result)
    reply = {"type": "result", "id": msg["id"], "status": "ok", "outputs": msg["outputs"],
             "timings_us": [1.0] * (msg["timing"]["iterations"] if msg.get("timing") else 0)}
    if "error" in cid:
        reply = {"type": "result", "id": msg["id"], "status": "error", "message": "RuntimeError: kernel raised"}
    if "wrong_id" in cid:
        reply["id"] = "not-" + msg["id"]
    if "wrong_outputs_path" in cid:
        reply["outputs"] = msg["outputs"] + ".elsewhere"
    if "wrong_timings" in cid:
        reply["timings_us"] = reply["timings_us"] + [1.0]
    if "negative_time" in cid:
        reply["timings_us"] = [-1.0] * len(reply["timings_us"])
    send(reply)

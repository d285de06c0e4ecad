"""conform CPU stand-in for `torch.distributed` as the MC2 rank script uses it: a process
group over the ranks `torch.distributed.run` (this package's run.py) started, whose "HCCL
communicator name" names a rendezvous directory. The ranks are processes of one host; they
exchange arrays through files there (`exchange`, used by the torch_npu stand-in's all-reduce)
and meet at `barrier`. run.py removes the directory when every rank has exited."""
import os
import tempfile
import time

import numpy as _np


class _Backend:
    def __init__(self, name):
        self.name = name

    def get_hccl_comm_name(self, rank):
        return self.name


class _Group:
    def __init__(self):
        self.rank = None
        self.world = None
        self.comm = None
        self.calls = 0

    def _get_backend(self, device):
        if self.comm is None:
            raise RuntimeError("stand-in: the default process group is not initialised")
        return _Backend(self.comm)


class group:  # noqa: N801  (torch.distributed.group)
    WORLD = _Group()


def rendezvous_dir(comm):
    return os.path.join(tempfile.gettempdir(), comm)


def init_process_group(backend=None, **kwargs):
    if backend != "hccl":
        raise RuntimeError("stand-in: only the hccl backend is modelled, not %r" % backend)
    g = group.WORLD
    g.rank = int(os.environ["RANK"])
    g.world = int(os.environ["WORLD_SIZE"])
    g.comm = "conform-standin-hccl-%s-%s" % (os.environ["MASTER_PORT"], os.environ.get(
        "CONFORM_STANDIN_RUN", "0"))
    g.calls = 0
    os.makedirs(rendezvous_dir(g.comm), exist_ok=True)


def exchange(array, comm=None, timeout_s=300):
    """Every rank's `array` of this collective call, in rank order (the caller's own
    included). Each collective call of the group has its own sequence number."""
    g = group.WORLD
    if g.comm is None or (comm is not None and comm != g.comm):
        raise RuntimeError("stand-in: communicator %r is not the process group's" % comm)
    n = g.calls
    g.calls += 1
    d = rendezvous_dir(g.comm)
    tmp = os.path.join(d, "c%d.rank%d.tmp.npy" % (n, g.rank))
    _np.save(tmp, _np.asarray(array))
    os.replace(tmp, os.path.join(d, "c%d.rank%d.npy" % (n, g.rank)))
    deadline = time.monotonic() + timeout_s
    parts = []
    for r in range(g.world):
        path = os.path.join(d, "c%d.rank%d.npy" % (n, r))
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise RuntimeError("stand-in collective %d: rank %d never arrived" % (n, r))
            time.sleep(0.002)
        parts.append(_np.load(path))
    return parts


def barrier(group=None, **kwargs):  # noqa: A002
    exchange(_np.zeros(1, _np.uint8))


def get_rank():
    return group.WORLD.rank


def get_world_size():
    return group.WORLD.world


def destroy_process_group(group=None):  # noqa: A002
    globals()["group"].WORLD.comm = None

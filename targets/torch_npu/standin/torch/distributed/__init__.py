"""conform CPU stand-in for `torch.distributed` as the MC2 rank script uses it: a process
group over the ranks `torch.distributed.run` (this package's run.py) started, whose "HCCL
communicator name" names the rendezvous directory torch_npu's stand-in all-reduce uses."""
import os


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

    def _get_backend(self, device):
        if self.comm is None:
            raise RuntimeError("stand-in: the default process group is not initialised")
        return _Backend(self.comm)


class group:  # noqa: N801  (torch.distributed.group)
    WORLD = _Group()


def init_process_group(backend=None, **kwargs):
    if backend != "hccl":
        raise RuntimeError("stand-in: only the hccl backend is modelled, not %r" % backend)
    g = group.WORLD
    g.rank = int(os.environ["RANK"])
    g.world = int(os.environ["WORLD_SIZE"])
    g.comm = "conform-standin-hccl-%s-%s" % (os.environ["MASTER_PORT"], os.environ.get(
        "CONFORM_STANDIN_RUN", "0"))


def get_rank():
    return group.WORLD.rank


def get_world_size():
    return group.WORLD.world


def destroy_process_group(group=None):  # noqa: A002
    globals()["group"].WORLD.comm = None

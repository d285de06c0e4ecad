"""conform CPU stand-in for `python -m torch.distributed.run` (torchrun): starts
--nproc_per_node copies of the script with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT set, waits for all, and exits with the first failure's code."""
import argparse
import os
import shutil
import subprocess
import tempfile
import sys
import uuid


def main(argv=None):
    ap = argparse.ArgumentParser(prog="torchrun (conform stand-in)")
    ap.add_argument("--standalone", action="store_true")
    ap.add_argument("--nproc_per_node", type=int, required=True)
    ap.add_argument("--master_port", type=int, default=29500)
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    run = uuid.uuid4().hex[:12]
    procs = []
    for r in range(a.nproc_per_node):
        env = dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(a.nproc_per_node),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.master_port),
                   CONFORM_STANDIN_RUN=run)
        procs.append(subprocess.Popen([sys.executable, a.script] + a.args, env=env))
    codes = [p.wait() for p in procs]
    # The process group's rendezvous directory (torch/distributed/__init__.py names it).
    shutil.rmtree(os.path.join(tempfile.gettempdir(), "conform-standin-hccl-%s-%s"
                               % (a.master_port, run)), ignore_errors=True)
    bad = [c for c in codes if c != 0]
    sys.exit(bad[0] if bad else 0)


if __name__ == "__main__":
    main()

"""conform CPU stand-in for `python -m torch.distributed.run` (torchrun): starts
--nproc_per_node copies of the script with RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT set, waits for all, and exits with the first failure's code.

Where the real torchrun starts a new interpreter per rank, this one forks itself (POSIX): each
rank is still its own process with its own environment, running the script as `__main__` with
its arguments, but numpy and this stand-in are already imported, which was most of a rank's
start (several tenths of a second of CPU for 8 ranks on 2 cores). Where fork is missing,
ranks start as new interpreters."""
import argparse
import atexit
import os
import runpy
import shutil
import subprocess
import tempfile
import sys
import traceback
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
    envs = [dict(os.environ, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(a.nproc_per_node),
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.master_port),
                 CONFORM_STANDIN_RUN=run) for r in range(a.nproc_per_node)]
    if hasattr(os, "fork"):
        sys.stdout.flush()
        sys.stderr.flush()
        pids = []
        for env in envs:
            pid = os.fork()
            if pid == 0:
                _become_rank(a.script, a.args, env)
            pids.append(pid)
        codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    else:
        procs = [subprocess.Popen([sys.executable, a.script] + a.args, env=env) for env in envs]
        codes = [p.wait() for p in procs]
    # The process group's rendezvous directory (torch/distributed/__init__.py names it).
    shutil.rmtree(os.path.join(tempfile.gettempdir(), "conform-standin-hccl-%s-%s"
                               % (a.master_port, run)), ignore_errors=True)
    bad = [c for c in codes if c != 0]
    sys.exit(bad[0] if bad else 0)


def _become_rank(script, args, env):
    """In a forked child: run `script` as `python script args...` would, with `env`, and
    exit with its status (never returns)."""
    code = 0
    try:
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [script] + list(args)
        sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            sys.stderr.write("%s\n" % (e.code,))
            code = 1
    except BaseException:  # noqa: BLE001 - as the interpreter would: traceback, status 1
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


if __name__ == "__main__":
    main()

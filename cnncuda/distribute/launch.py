"""``python -m cnncuda.distribute.launch --nproc N script.py [args]``: starts N
copies of a script on this host with the environment a launcher gives (RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), as ``torchrun --standalone
--nproc_per_node N`` does, for machines without PyTorch. Several hosts: run it
on each with ``--nnodes``, ``--node-rank`` and rank 0's ``--master-addr``.

If one copy fails, the others are told by the group (they raise) and, should
one still be running after --grace seconds, it is stopped. The exit status is
the first failing copy's, else 0.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m cnncuda.distribute.launch",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc", type=int, required=True, help="processes on this host")
    parser.add_argument("--nnodes", type=int, default=1, help="hosts (default 1)")
    parser.add_argument("--node-rank", type=int, default=0, help="this host's number")
    parser.add_argument("--master-addr", default="127.0.0.1", help="rank 0's host")
    parser.add_argument("--master-port", type=int, default=0,
                        help="rank 0's port (default: a free one; give it with --nnodes > 1)")
    parser.add_argument("--grace", type=float, default=30.0,
                        help="seconds the others get to end after one fails")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    a = parser.parse_args(argv)
    if a.nproc < 1 or a.nnodes < 1 or not 0 <= a.node_rank < a.nnodes:
        parser.error("expected --nproc >= 1, --nnodes >= 1 and 0 <= --node-rank < --nnodes")
    if a.nnodes > 1 and not a.master_port:
        parser.error("--master-port: every host needs the same port when --nnodes > 1")
    port = a.master_port or free_port()
    world = a.nproc * a.nnodes
    procs = []
    for local in range(a.nproc):
        env = dict(os.environ, RANK=str(a.node_rank * a.nproc + local), WORLD_SIZE=str(world),
                   LOCAL_RANK=str(local), LOCAL_WORLD_SIZE=str(a.nproc),
                   MASTER_ADDR=a.master_addr, MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, a.script] + a.args, env=env))
    status, failed_at = 0, None
    try:
        while any(p.poll() is None for p in procs):
            for p in procs:
                if p.returncode not in (None, 0) and status == 0:
                    status, failed_at = p.returncode, time.monotonic()
            if failed_at is not None and time.monotonic() - failed_at > a.grace:
                for p in procs:
                    if p.poll() is None:
                        p.send_signal(signal.SIGTERM)
            time.sleep(0.1)
    except KeyboardInterrupt:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in procs:
            p.wait()
        return 130
    for p in procs:
        if p.returncode != 0 and status == 0:
            status = p.returncode
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())

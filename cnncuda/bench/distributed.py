"""``python -m cnncuda.bench.distributed``: data-parallel scaling of the seed
CIFAR-10 CNN on 1, 2, 4 ... GPUs, and PyTorch DistributedDataParallel on the
same GPUs in the same run.

For each GPU count G and per-GPU batch b, cnncuda trains with
``MirroredStrategy(devices=range(G))`` on global batches of G*b (the fit path:
the data on every GPU once, an epoch's order, the epoch in one call per
replica, the sums read at its end); PyTorch runs tools/ddp_torch_bench.py
under ``torchrun --standalone --nproc_per_node G`` (NCCL, strict fp32, the
same synthetic data size). Both are strict float32 on synthetic images of
CIFAR shape, 50,000 per epoch, best of --epochs after one warm-up epoch.
Rows: seconds per epoch, images per second, speedup and scaling efficiency
over the same framework's one-GPU row.

    python -m cnncuda.bench.distributed --gpus 1,2,4 --batch-size 32,512 --json out.json
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

from .. import _C, seeds
from ..distribute import MirroredStrategy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = "cifar10_cnn"


def cnncuda_row(gpus, per_gpu, images, epochs, engine):
    """Best seconds per epoch of cnncuda on `gpus` GPUs."""
    s = seeds.seed_network(MODEL)
    x, y = seeds.synthetic_data(MODEL, images, seed=0)
    batch = per_gpu * gpus
    gpu = engine in ("cuda", "cudnn")     # cpu: replicas on the CPU, to check the bench itself
    strategy = MirroredStrategy(devices=["%s:%d" % (engine, g) if gpu else engine
                                         for g in range(gpus)])
    group = strategy.make_group(s["layers"], s["input_shape"], batch, s["loss"], s["optimizer"])
    group.set_data(x, y)
    rng = np.random.default_rng(0)
    times = []
    for epoch in range(epochs + 1):           # the first is the warm-up
        group.set_order(rng.permutation(images).astype(np.int32))
        group.read_sums()
        began = time.perf_counter()
        group.train_range(0, images, batch)
        loss, correct = group.epoch_sums()     # waits for every GPU
        if epoch:
            times.append(time.perf_counter() - began)
    group.close()
    best = min(times)
    return {"framework": "cnncuda-%s" % engine, "gpus": gpus, "per_gpu_batch": per_gpu,
            "seconds_per_epoch": best, "images_per_second": images / best,
            "last_epoch_accuracy": correct / images}


def torch_row(gpus, per_gpu, images, epochs):
    """PyTorch DDP's row from tools/ddp_torch_bench.py under torchrun, or None."""
    torchrun = shutil.which("torchrun")
    if torchrun is None:
        return None
    cmd = [torchrun, "--standalone", "--nproc_per_node", str(gpus),
           os.path.join(ROOT, "tools", "ddp_torch_bench.py"), "--batch-size", str(per_gpu),
           "--epochs", str(epochs), "--images", str(images)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                         env=dict(os.environ, NCCL_NVLS_ENABLE=os.environ.get(
                             "NCCL_NVLS_ENABLE", "0")))
    for line in run.stdout.splitlines():
        if line.startswith("{"):
            return json.loads(line)
    print("torchrun failed (%d): %s" % (run.returncode, run.stderr[-2000:]), file=sys.stderr)
    return None


def add_scaling(rows):
    """speedup and efficiency over the same framework's 1-GPU row (same batch)."""
    for row in rows:
        base = next((r for r in rows if r["framework"] == row["framework"] and r["gpus"] == 1
                     and r["per_gpu_batch"] == row["per_gpu_batch"]), None)
        if base:
            row["speedup"] = base["seconds_per_epoch"] / row["seconds_per_epoch"]
            row["efficiency"] = row["speedup"] / row["gpus"]
    return rows


def table(rows):
    lines = ["| framework | GPUs | per-GPU batch | s/epoch | images/s | speedup | efficiency |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append("| %s | %d | %d | %.4f | %.0f | %s | %s |" % (
            r["framework"], r["gpus"], r["per_gpu_batch"], r["seconds_per_epoch"],
            r["images_per_second"], "%.2fx" % r["speedup"] if "speedup" in r else "",
            "%.0f%%" % (100 * r["efficiency"]) if "efficiency" in r else ""))
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m cnncuda.bench.distributed",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--gpus", default="1,2,4", help="GPU counts (default 1,2,4)")
    p.add_argument("--batch-size", default="32,512", help="per-GPU batch sizes")
    p.add_argument("--epochs", type=int, default=3, help="timed epochs (best is reported)")
    p.add_argument("--images", type=int, default=50000, help="images per epoch")
    p.add_argument("--engine", default=None,
                   help="cuda or cudnn (default: cudnn where it runs); cpu runs CPU replicas "
                        "(a check of the bench on a machine without GPUs)")
    p.add_argument("--frameworks", default="auto", choices=["auto", "none"],
                   help="PyTorch DDP rows where torchrun is found (auto), or none")
    p.add_argument("--json", help="write the rows here")
    a = p.parse_args(argv)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")    # no NVLink multicast on shared hosts
    visible = len(_C.cuda_devices())
    counts = [int(g) for g in a.gpus.split(",")]
    engine = a.engine or next((e for e in ("cudnn", "cuda") if _C.engine_status(e) is None), None)
    if engine is None:
        p.error("no GPU engine can run here: %s" % _C.engine_status("cuda"))
    rows = []
    for per_gpu in [int(b) for b in a.batch_size.split(",")]:
        for gpus in counts:
            if gpus > visible and engine != "cpu":
                print("skipped: %d GPUs asked, %d visible" % (gpus, visible), flush=True)
                continue
            rows.append(cnncuda_row(gpus, per_gpu, a.images, a.epochs, engine))
            print(json.dumps(rows[-1]), flush=True)
            if a.frameworks == "auto":
                row = torch_row(gpus, per_gpu, a.images, a.epochs)
                if row:
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    add_scaling(rows)
    print(table(rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpus": _C.cuda_devices(), "versions": _C.cuda_versions(),
                       "rows": rows, "command": " ".join(sys.argv)}, f, indent=1)
    return rows


if __name__ == "__main__":
    main()

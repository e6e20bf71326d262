"""Seconds per epoch of the seed networks on the engines of this machine.

    python -m cnncuda.bench --model cifar10_cnn --device cpu

trains one epoch (the experiment's training-set size, or --images) of
synthetic data of the seed's shape on each engine, after one warm-up step,
the way fit does (the data uploaded to the engine once, each epoch's shuffled
order gathered there, the sums read back at the end of the epoch),
and prints seconds per epoch, images per second, milliseconds per step and
the speedup over the sequential ``cpu`` engine. The data are synthetic
(class templates plus noise), and every row says so.

CPU scaling: ``--threads 1,2,4,8,16`` adds an ``omp:N`` row per count, and
``--torch-threads 1,2,4,8,16`` PyTorch CPU rows at those counts (skipped,
with a note, where torch is not installed); each of our rows then also gives
its ratio to PyTorch at the same thread count (``cpu`` against 1 thread)::

    python -m cnncuda.bench --model cifar10_cnn --model lenet5 --device numpy \
        --device cpu --threads 1,2,4,8,16 --torch-threads 1,2,4,8,16 --images 10000
"""
import argparse
import json
import platform
import sys
import time

import numpy as np

from . import build_info, devices
from .engine import make_net
from .seeds import SEEDS, parameter_count, seed_network, synthetic_data

__all__ = ["run", "main"]


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def time_epoch(model, device, batch_size=None, images=None, seed=0, epochs=1, log=print):
    """Trains `epochs` epochs of `images` synthetic samples on `device`; returns a row dict."""
    spec = seed_network(model)
    batch = batch_size or spec["batch_size"]
    n = images or spec["train_images"]
    x, y = synthetic_data(model, n, seed=seed)
    net = make_net(device, spec["layers"], spec["input_shape"], batch, spec["loss"],
                   spec["optimizer"], seed=seed)
    net.train_batch(x[:batch], y[:batch])  # warm-up: first touch of every buffer
    net.set_data(x, y)                      # the training set goes to the engine once, as fit does
    steps = (n + batch - 1) // batch
    rng = np.random.default_rng(seed)
    seconds = []
    loss = correct = 0.0
    for epoch in range(epochs):
        net.set_order(rng.permutation(n))
        net.read_sums(reset=True)
        start = time.perf_counter()
        net.train_range(0, n, batch)
        loss, correct = net.read_sums()  # waits for the engine
        seconds.append(time.perf_counter() - start)
        log("  %s on %s: epoch %d/%d  %.3f s  loss %.4f  accuracy %.4f"
            % (model, device, epoch + 1, epochs, seconds[-1], loss / n, correct / n))
    best = min(seconds)
    return {
        "model": model, "device": device, "batch_size": batch, "images": n,
        "data": "synthetic", "parameters": parameter_count(net),
        "seconds_per_epoch": best, "images_per_second": n / best,
        "ms_per_step": 1000.0 * best / steps, "final_loss": loss / n,
        "final_accuracy": correct / n,
    }


def torch_row(model, batch_size=None, images=None, seed=0, threads=1, variant="cpu", log=print):
    """The same epoch in PyTorch as a row: variant 'cpu' (with `threads`
    threads), 'cuda' (eager) or 'cuda-graph' (the whole step in a CUDA graph)."""
    from . import bench_torch
    spec = seed_network(model)
    batch = batch_size or spec["batch_size"]
    n = images or spec["train_images"]
    x, y = synthetic_data(model, n, seed=seed)
    if variant == "cuda-graph":
        seconds, n = bench_torch.time_epoch_cuda_graph(spec, x, y, batch)
        name = "torch-cuda-graph"
    else:
        seconds = bench_torch.time_epoch(spec, x, y, batch, threads=threads,
                                         device="cuda" if variant == "cuda" else "cpu")
        name = "torch-cuda" if variant == "cuda" else "torch-cpu:%d" % threads
    import torch
    log("  %s on %s (torch %s): %.3f s" % (model, name, torch.__version__, seconds))
    steps = (n + batch - 1) // batch
    return {"model": model, "device": name, "batch_size": batch,
            "images": n, "data": "synthetic", "seconds_per_epoch": seconds,
            "images_per_second": n / seconds, "ms_per_step": 1000.0 * seconds / steps}


def _torch_threads_of(device):
    """The PyTorch CPU row an engine's row is compared with: 'cpu' -> 1,
    'omp:N' -> N, others None."""
    if device == "cpu":
        return 1
    if device.startswith("omp:"):
        return int(device[4:])
    return None


def run(models=("cifar10_cnn",), engines=None, batch_size=None, images=None, epochs=1, seed=0,
        torch_threads=(), torch_gpu=False, log=print, threads=()):
    """Times every model on every engine, then on ``omp:N`` for each N of
    `threads` (and PyTorch on the CPU at each of `torch_threads`, when
    importable); returns the rows, also printed as a table."""
    if engines:
        engines = list(engines)
    elif threads:
        engines = [d for d in devices() if d in ("numpy", "cpu")]
    else:
        engines = [d for d in devices() if d != "numpy"]
    engines += ["omp:%d" % t for t in threads if "omp:%d" % t not in engines]
    if torch_threads:
        from . import bench_torch
        if not bench_torch.available():
            log("torch is not installed: no PyTorch rows")
            torch_threads = ()
    info = build_info()
    log("cnncuda %s | %s | %s | Python %s | NumPy %s"
        % (info["version"], _cpu_model(), platform.machine(), platform.python_version(),
           np.__version__))
    log("build: %s | cpu gemm: %s" % (info["summary"], info["gemm"]))
    rows = []
    for model in models:
        for device in engines:
            rows.append(time_epoch(model, device, batch_size, images, seed, epochs, log))
        for threads in torch_threads:
            rows.append(torch_row(model, batch_size, images, seed, threads, "cpu", log))
        if torch_gpu:
            for variant in ("cuda", "cuda-graph"):
                rows.append(torch_row(model, batch_size, images, seed, 1, variant, log))
    log("")
    log("%-12s %-13s %6s %7s %10s %10s %9s %8s %8s  %s" % ("model", "engine", "batch",
        "images", "s/epoch", "images/s", "ms/step", "speedup", "vs torch", "data"))
    for r in rows:
        base = next((b for b in rows if b["model"] == r["model"] and b["device"] == "cpu"), None)
        speedup = base["seconds_per_epoch"] / r["seconds_per_epoch"] if base else float("nan")
        r["speedup_vs_cpu"] = speedup
        # > 1: faster than PyTorch on the CPU with the same number of threads
        t = _torch_threads_of(r["device"])
        torch = next((b for b in rows if b["model"] == r["model"]
                      and b["device"] == "torch-cpu:%s" % t), None)
        vs_torch = torch["seconds_per_epoch"] / r["seconds_per_epoch"] if torch else None
        if vs_torch is not None:
            r["speedup_vs_torch"] = vs_torch
        log("%-12s %-13s %6d %7d %10.3f %10.1f %9.2f %8.2f %8s  %s" % (r["model"], r["device"],
            r["batch_size"], r["images"], r["seconds_per_epoch"], r["images_per_second"],
            r["ms_per_step"], speedup, "%.2f" % vs_torch if vs_torch is not None else "",
            r["data"]))
    return rows


def _counts(text):
    """'1,2,4' -> [1, 2, 4]: thread counts, each >= 1."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("expected thread counts >= 1 such as 1,2,4, got %r"
                                         % text)
    return counts


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m cnncuda.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", action="append", choices=sorted(SEEDS),
                   help="seed network (repeatable; default cifar10_cnn)")
    p.add_argument("--device", action="append",
                   help="engine (repeatable; default every engine of this machine but numpy)")
    p.add_argument("--batch-size", type=int, default=None, help="default: the seed's batch")
    p.add_argument("--images", type=int, default=None,
                   help="images per epoch (default: the experiment's training-set size)")
    p.add_argument("--epochs", type=int, default=1, help="epochs timed; the best is reported")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=_counts, action="append", default=[],
                   help="also time the omp engine at these thread counts, e.g. 1,2,4,8,16 "
                        "(repeatable); without --device the other engines are numpy and cpu")
    p.add_argument("--torch-threads", type=_counts, action="append", default=[],
                   help="also time PyTorch on the CPU with this many threads, or with each of "
                        "a list such as 1,2,4,8,16 (repeatable; skipped without torch)")
    p.add_argument("--torch-gpu", action="store_true",
                   help="also time PyTorch on the GPU, eager and with the step in a CUDA graph")
    p.add_argument("--json", help="write the rows to this file")
    args = p.parse_args(argv)
    flat = lambda lists: [t for counts in lists for t in counts]  # noqa: E731
    rows = run(args.model or ["cifar10_cnn"], args.device, args.batch_size, args.images,
               args.epochs, args.seed, flat(args.torch_threads), args.torch_gpu,
               threads=flat(args.threads))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

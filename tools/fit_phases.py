"""Where a fit call's fixed cost goes, phase by phase (a developer's tool).

    python3 tools/fit_phases.py --device cuda

Builds the seed CIFAR-10 network, then times (best of five, seconds) each
piece that runs before a fit call's first step, on 50,000 CIFAR-shaped
images (10,000 for validation): ``set_data`` for float64, float32 and uint8
input, ``set_validation`` (float64), ``set_order``, and a whole fit call on
32 images (Python's checks and callbacks, the engine calls' floor).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from cnncuda.bench.script import keras_model  # noqa: E402


def best(call, repeats=5):
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return min(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    x8 = rng.integers(0, 256, (50000, 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, 10, (50000, 1))
    xv = rng.integers(0, 256, (10000, 32, 32, 3), dtype=np.uint8) / 255.0
    yv = rng.integers(0, 10, (10000, 1))
    x64 = x8 / 255.0
    x32 = x64.astype(np.float32)
    model = keras_model("cifar10_cnn", args.device)
    model.fit(x32[:64], y[:64], epochs=1, verbose=0)       # the network built, warm
    net = model._net
    out = {}
    for name, x in (("float64", x64), ("float32", x32), ("uint8", x8)):
        out["set_data " + name] = best(lambda: net.set_data(x, y))
    out["set_validation float64"] = best(lambda: net.set_validation(xv, yv))
    order = np.random.default_rng(1).permutation(50000)
    out["set_order"] = best(lambda: net.set_order(order))
    out["fit, 32 images"] = best(lambda: model.fit(x32[:32], y[:32], epochs=1, verbose=0))
    out["fit, 50,000 float64, 0 epochs"] = best(
        lambda: model.fit(x64, y, epochs=0, verbose=0, validation_data=(xv, yv)))
    out.update(validation_kernels(net, xv, yv))
    for key, seconds in out.items():
        print("%-40s %8.4f s" % (key, seconds))


def validation_kernels(net, xv, yv):
    """The validation pass's wall time (replayed) and, through the PyTorch
    profiler where torch sees a GPU, the GPU time of its kernels alone (a
    pass queued without recording: the profiler sees each kernel)."""
    out = {}
    net.set_validation(None, None)
    net.set_validation(xv, yv)
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
        if not torch.cuda.is_available():
            raise ImportError
    except ImportError:
        return out
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        net.evaluate_validation()                   # the first pass: queued as it runs
    total_us = 0.0
    for event in prof.key_averages():
        total_us += getattr(event, "self_device_time_total", None) or \
            getattr(event, "self_cuda_time_total", 0.0)
    out["validation pass, kernels only"] = total_us / 1e6
    net.evaluate_validation()                       # recorded
    out["validation pass, replayed (wall)"] = best(net.evaluate_validation)
    return out


if __name__ == "__main__":
    main()

"""Where a data-parallel step's time goes: for W = 1, 2, 4 GPUs, the seed
CIFAR-10 CNN at a per-GPU batch (default 512) trained as a MirroredStrategy
group (the all-reduce in every step) and as W independent networks, one per
GPU, driven at once from the same process (no communicator). The difference
per step is what the gradients' all-reduce and the group's synchronisation
cost; the independent networks against one alone show what W GPUs driven
together cost each other. Best of 4 after a warm-up (which records the step).

    python tools/dp_step_overhead.py [--batch 512] [--steps 24] [--engine cudnn]
"""
import argparse
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cnncuda import _C, distribute, engine, seeds  # noqa: E402

SEED = seeds.seed_network("cifar10_cnn")


def best_of(run, reps=4):
    run()
    best = float("inf")
    for _ in range(reps):
        began = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - began)
    return best


def group_seconds(name, world, per_gpu, images):
    x, y = seeds.synthetic_data("cifar10_cnn", images, seed=0)
    group = distribute.MirroredStrategy(devices=["%s:%d" % (name, i) for i in range(world)]) \
        .make_group(SEED["layers"], SEED["input_shape"], per_gpu * world, SEED["loss"],
                    SEED["optimizer"])
    group.set_data(x, y)
    group.set_order(np.arange(images, dtype=np.int32))

    def run():
        group.train_range(0, images, per_gpu * world)
        group.epoch_sums()
    try:
        return best_of(run)
    finally:
        group.close()


def independent_seconds(name, world, per_gpu, images):
    x, y = seeds.synthetic_data("cifar10_cnn", images, seed=0)
    nets = [engine.make_net(name, SEED["layers"], SEED["input_shape"], per_gpu, SEED["loss"],
                            SEED["optimizer"], device_index=i) for i in range(world)]
    for net in nets:
        net.set_data(x, y)
        net.set_order(np.arange(images, dtype=np.int32))

    def one(net):
        net.train_range(0, images, per_gpu)
        net.read_sums()

    def run():
        threads = [threading.Thread(target=one, args=(net,)) for net in nets]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return best_of(run)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=512, help="per-GPU batch")
    p.add_argument("--steps", type=int, default=24, help="full steps timed")
    p.add_argument("--engine", default="cudnn", choices=("cuda", "cudnn"))
    a = p.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    gpus = _C.cuda_devices()
    print("GPUs:", ", ".join(gpus))
    for world in (1, 2, 4):
        if world > len(gpus):
            break
        g = group_seconds(a.engine, world, a.batch, a.batch * world * a.steps)
        i = independent_seconds(a.engine, world, a.batch, a.batch * a.steps)
        print("%d GPU(s), %d steps of %d per GPU: group %.3f ms/step, independent networks "
              "%.3f ms/step, all-reduce and synchronisation %.1f us/step"
              % (world, a.steps, a.batch, 1e3 * g / a.steps, 1e3 * i / a.steps,
                 1e6 * (g - i) / a.steps), flush=True)


if __name__ == "__main__":
    main()

"""PyTorch DistributedDataParallel on the seed CIFAR-10 CNN: the data-parallel
baseline for cnncuda's own (NCCL) data parallelism.

    torchrun --standalone --nproc_per_node=N tools/ddp_torch_bench.py --batch-size 512 --epochs 3

One process per GPU (torchrun's LOCAL_RANK picks it), NCCL between them;
where no GPU is visible the ranks run on the CPU with gloo, as a smoke test
of the script itself. The model is bench_torch's (imported, so both rows
measure the same network), in strict float32 as bench_torch runs it (TF32
off in cuDNN and in matrix products), trained with Adam at Keras's settings
(bench_torch's). Each rank holds its own synthetic data of CIFAR's shape on
its device and trains `--images / N` of them per epoch (an epoch is the
images of all ranks together) in steps of `--batch-size` images per GPU,
each batch gathered on the device by index, as bench_torch does; every rank
takes the same number of steps, which DDP needs.

One untimed warm-up epoch first (cuDNN's and NCCL's set-up, as
cnncuda.bench.distributed warms cnncuda up), then --epochs timed ones: each
on the host between two torch.cuda.synchronize() calls, after a barrier so
that the ranks start together; an epoch's time is the slowest rank's. Rank 0
prints one JSON line (cnncuda.bench.distributed reads it):

    {"framework": "torch-ddp", "gpus": N, "per_gpu_batch": B,
     "seconds_per_epoch": <best epoch>, "images_per_second": <images / best>, ...}

("gpus" is the number of ranks, N; on the CPU smoke test "device" says
"cpu" and "backend" "gloo".)
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

# run from a checkout (torchrun puts tools/, not the root, on the path)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from cnncuda.bench.torch import _module, _targets_and_loss  # noqa: E402
from cnncuda.seeds import seed_network  # noqa: E402

MODEL = "cifar10_cnn"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-size", type=int, default=512, help="images per GPU per step")
    p.add_argument("--epochs", type=int, default=3,
                   help="timed epochs after one warm-up epoch (the best is reported)")
    p.add_argument("--images", type=int, default=50000,
                   help="images per epoch, all ranks together (CIFAR-10's training set)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.batch_size < 1 or args.epochs < 1 or args.images < 1:
        p.error("--batch-size, --epochs and --images must be positive")
    return args


def setup():
    """Joins the group torchrun describes; returns (rank, world, device)."""
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        if local_rank >= torch.cuda.device_count():
            sys.exit("rank with LOCAL_RANK %d: only %d GPUs visible"
                     % (local_rank, torch.cuda.device_count()))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    return dist.get_rank(), dist.get_world_size(), device


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def barrier(device):
    if device.type == "cuda":
        dist.barrier(device_ids=[device.index])
    else:
        dist.barrier()


def rank_data(spec, images, seed, rank, device):
    """This rank's share of synthetic CIFAR-shaped data, on `device`: images
    (images, 3, 32, 32) uniform in [0, 1) and their targets in the form the
    seed's loss takes, with bench_torch's loss and correct-count functions."""
    h, w, c = spec["input_shape"]
    g = torch.Generator(device="cpu").manual_seed(seed * 1000003 + rank)
    xs = torch.rand((images, c, h, w), generator=g).to(device)
    labels = np.random.default_rng([seed, rank]).integers(0, spec["classes"], size=images)
    ys, loss_fn, _ = _targets_and_loss(spec, labels, device, torch)
    return xs, ys, loss_fn


def main():
    args = parse_args()
    rank, world, device = setup()
    # strict float32, as bench_torch's rows
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False

    spec = seed_network(MODEL)
    per_rank = args.images // world
    if per_rank < 1:
        sys.exit("--images %d is fewer than one per rank (%d ranks)" % (args.images, world))
    xs, ys, loss_fn = rank_data(spec, per_rank, args.seed, rank, device)

    torch.manual_seed(args.seed)  # the same initial weights everywhere (DDP broadcasts rank 0's too)
    model = _module(spec, torch).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(ddp(xb), yb)
        loss.backward()  # DDP all-reduces (averages) the gradients here
        opt.step()
        return loss.detach()

    batch = args.batch_size
    order_gen = torch.Generator(device="cpu").manual_seed(args.seed * 7919 + rank)
    seconds = []
    for epoch in range(args.epochs + 1):  # epoch 0 is the warm-up
        order = torch.randperm(per_rank, generator=order_gen).to(device)
        synchronize(device)
        barrier(device)
        synchronize(device)
        start = time.perf_counter()
        for lo in range(0, per_rank, batch):
            idx = order[lo:lo + batch]
            loss = step(xs[idx], ys[idx])
        synchronize(device)
        elapsed = time.perf_counter() - start
        slowest = torch.tensor([elapsed], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        if epoch:
            seconds.append(float(slowest.item()))
        if rank == 0:
            print("epoch %d%s: %.3f s (last loss %.4f)"
                  % (epoch, " (warm-up)" if epoch == 0 else "", float(slowest.item()),
                     float(loss)), file=sys.stderr, flush=True)

    if rank == 0:
        best = min(seconds)
        images = per_rank * world
        print(json.dumps({
            "framework": "torch-ddp",
            "gpus": world,
            "per_gpu_batch": batch,
            "seconds_per_epoch": best,
            "images_per_second": images / best,
            "backend": dist.get_backend(),
            "images_per_epoch": images,
            "epoch_seconds": seconds,
            "model": MODEL,
            "torch": torch.__version__,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        }), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

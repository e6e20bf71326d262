"""The same seed network in PyTorch, for rows measured side by side with ours.

Only used when torch is importable; nothing in cnncuda needs it. The model is
built from the seed's layer list (NCHW inside, as PyTorch wants), trained with
Adam at Keras's settings (eps 1e-7) on the same synthetic data.
"""
import time

import numpy as np

__all__ = ["available", "time_epoch", "time_epoch_cuda_graph"]


def available():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _module(spec, torch):
    nn = torch.nn
    h, w, c = spec["input_shape"] if len(spec["input_shape"]) == 3 else (1, 1, spec["input_shape"][0])
    shape = [c, h, w]
    mods = []
    for layer in spec["layers"]:
        kind = layer["kind"]
        if kind == "conv2d":
            kh, kw = layer["kernel"]
            same = layer.get("padding", "valid") == "same"
            mods.append(nn.Conv2d(shape[0], layer["units"], (kh, kw),
                                  padding="same" if same else 0))
            shape = [layer["units"], shape[1] if same else shape[1] - kh + 1,
                     shape[2] if same else shape[2] - kw + 1]
        elif kind in ("maxpool", "avgpool"):
            kh, kw = layer["kernel"]
            mods.append((nn.MaxPool2d if kind == "maxpool" else nn.AvgPool2d)((kh, kw)))
            shape = [shape[0], shape[1] // kh, shape[2] // kw]
        elif kind == "flatten":
            mods.append(nn.Flatten())
            shape = [shape[0] * shape[1] * shape[2]]
        elif kind == "dense":
            mods.append(nn.Linear(shape[0], layer["units"]))
            shape = [layer["units"]]
        elif kind == "activation":
            act = layer["activation"]
            if act != "linear":
                mods.append({"relu": nn.ReLU(), "sigmoid": nn.Sigmoid(), "tanh": nn.Tanh(),
                             "softmax": nn.Softmax(dim=1)}[act])
        else:
            raise ValueError("bench_torch: layer kind %r not supported" % kind)
    return nn.Sequential(*mods)


def _setup(spec, x, y, device, torch, capturable=False):
    torch.manual_seed(0)
    model = _module(spec, torch).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7,
                           capturable=capturable)
    kind = spec["loss"]["kind"]
    xs = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2))).to(device)
    if kind == "sparse_categorical_crossentropy":
        ys = torch.from_numpy(np.asarray(y).reshape(-1).astype(np.int64)).to(device)
        loss_fn = torch.nn.CrossEntropyLoss()
    elif kind == "categorical_crossentropy":
        ys = torch.from_numpy(np.argmax(y, axis=1)).to(device)
        nll = torch.nn.NLLLoss()
        loss_fn = lambda out, t: nll(torch.log(out.clamp_min(1e-7)), t)  # noqa: E731
    else:
        ys = torch.from_numpy(np.asarray(y, np.float32).reshape(len(y), -1)).to(device)
        loss_fn = torch.nn.BCELoss()
    return model, opt, xs, ys, loss_fn


def time_epoch(spec, x, y, batch, threads=1, device="cpu"):
    """Seconds for one pass over (x, y) at `batch`, after one warm-up step,
    in a new random order (the data already on `device`)."""
    import torch
    torch.set_num_threads(threads)
    model, opt, xs, ys, loss_fn = _setup(spec, x, y, device, torch)
    order = torch.randperm(len(x), device=device)

    def step(lo, hi):
        idx = order[lo:hi]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xs[idx]), ys[idx])
        loss.backward()
        opt.step()
        return loss

    float(step(0, batch))
    n = len(x)
    start = time.perf_counter()
    for lo in range(0, n, batch):
        last = step(lo, min(n, lo + batch))
    float(last)  # waits for the device
    return time.perf_counter() - start


def time_epoch_cuda_graph(spec, x, y, batch):
    """(seconds, images) for one pass over the full batches of (x, y) with the
    whole training step (forward, loss, backward, Adam) captured once in a
    CUDA graph and replayed; each step copies its batch into the graph's
    static input on the GPU."""
    import torch
    model, opt, xs, ys, loss_fn = _setup(spec, x, y, "cuda", torch, capturable=True)
    static_x = xs[:batch].clone()
    static_y = ys[:batch].clone()

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(static_x), static_y)
        loss.backward()
        opt.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = step()
    steps = len(x) // batch
    order = torch.randperm(steps * batch, device="cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    for s in range(steps):
        idx = order[s * batch:(s + 1) * batch]
        static_x.copy_(xs[idx])
        static_y.copy_(ys[idx])
        graph.replay()
    float(static_loss)
    return time.perf_counter() - start, steps * batch

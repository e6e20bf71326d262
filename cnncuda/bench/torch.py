"""The same seed network in PyTorch, for rows measured side by side with ours.

Only used when torch is importable; nothing in cnncuda needs it. The model is
built from the seed's layer list (NCHW inside, as PyTorch wants; batch
normalization with Keras's momentum 0.99 and epsilon 1e-3), trained with Adam
at Keras's settings (eps 1e-7) on the same data, the whole training set on the
device and each batch gathered there by index, as our engines do. The loss
and accuracy are summed on the device every step (as our engines sum them)
and read at the end of the epoch.

Variants: 'cpu' (``threads`` threads), 'cuda' (eager) and 'cuda-graph' (the
whole step -- forward, loss, backward, Adam, the sums -- captured once in a
CUDA graph and replayed over the epoch's full batches, each copied into the
graph's static input on the GPU). GPU epochs are timed with CUDA events.

Strict float32, as our engines by default: PyTorch lets cuDNN use TF32 in
convolutions unless told not to (``torch.backends.cudnn.allow_tf32`` is True
by default), so the runner turns TF32 off in cuDNN and in matrix products
for its rows (and puts the settings back afterwards). With
``precision='tf32'`` (the bench's ``--precision tf32``, beside our GPU
engines in TF32) the GPU variants turn it on in both instead and are
labelled ``torch-cuda-tf32``, ``torch-cuda-graph-tf32``; the CPU variant
stays float32.
"""
import time

import numpy as np

from .cnncuda import row_label, row_precision
from ..seeds import seed_network

__all__ = ["available", "TorchRunner", "VARIANTS"]

VARIANTS = ("cpu", "cuda", "cuda-graph")


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
        elif kind == "batchnorm":  # Keras's momentum m is PyTorch's 1 - m
            norm = nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d
            mods.append(norm(shape[0], eps=layer.get("epsilon", 1e-3),
                             momentum=1.0 - layer.get("momentum", 0.99)))
        elif kind == "dropout":
            mods.append(nn.Dropout(layer["rate"]))
        elif kind == "activation":
            act = layer["activation"]
            if act != "linear":
                mods.append({"relu": nn.ReLU(), "sigmoid": nn.Sigmoid(), "tanh": nn.Tanh(),
                             "softmax": nn.Softmax(dim=1)}[act])
        else:
            raise ValueError("bench_torch: layer kind %r not supported" % kind)
    return nn.Sequential(*mods)


def _targets_and_loss(spec, y, device, torch):
    """(targets on `device`, loss function, correct-count function)."""
    kind = spec["loss"]["kind"]
    logits = spec["loss"].get("from_logits", False)
    if kind in ("sparse_categorical_crossentropy", "categorical_crossentropy"):
        labels = np.asarray(y).reshape(-1) if kind.startswith("sparse") else np.argmax(y, axis=1)
        targets = torch.from_numpy(labels.astype(np.int64)).to(device)
        if logits:
            loss_fn = torch.nn.CrossEntropyLoss()
        else:
            nll = torch.nn.NLLLoss()
            loss_fn = lambda out, t: nll(torch.log(out.clamp(1e-7, 1 - 1e-7)), t)  # noqa: E731
        correct_fn = lambda out, t: (out.argmax(1) == t).sum()  # noqa: E731
    else:
        targets = torch.from_numpy(np.asarray(y, np.float32).reshape(len(y), -1)).to(device)
        loss_fn = torch.nn.BCEWithLogitsLoss() if logits else torch.nn.BCELoss()
        threshold = 0.0 if logits else 0.5
        correct_fn = lambda out, t: ((out > threshold) == (t > 0.5)).float().mean(1).sum()  # noqa: E731
    return targets, loss_fn, correct_fn


class TorchRunner:
    """Seed `model` in PyTorch (variant 'cpu', 'cuda' or 'cuda-graph') on
    `data` (a BenchData) at batch size `batch`."""

    framework = "torch"

    def __init__(self, model, data, batch, variant="cpu", threads=1, seed=0,
                 precision="float32"):
        if variant not in VARIANTS:
            raise ValueError("variant: expected one of %s, got %r" % (", ".join(VARIANTS), variant))
        self.gpu = variant != "cpu"
        self.precision = row_precision(self.gpu, precision)
        import torch
        self.torch = torch
        self.variant = variant
        self.name = row_label("torch-cpu:%d" % threads if variant == "cpu" else "torch-" + variant,
                              self.precision)
        self.version = torch.__version__
        self.batch = batch
        # strict fp32 (TF32 off), or TF32 on where asked, while this runner
        # lives: see the docstring
        self._tf32 = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
        tf32 = self.precision == "tf32"
        torch.backends.cudnn.allow_tf32 = tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        device = "cuda" if self.gpu else "cpu"
        if self.gpu:
            torch.cuda.reset_peak_memory_stats()
        else:
            torch.set_num_threads(threads)
        spec = seed_network(model)
        torch.manual_seed(seed)
        self.model = _module(spec, torch).to(device)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3, betas=(0.9, 0.999),
                                    eps=1e-7, capturable=variant == "cuda-graph")
        self.xs = torch.from_numpy(np.ascontiguousarray(data.x.transpose(0, 3, 1, 2))).to(device)
        self.ys, self.loss_fn, self.correct_fn = _targets_and_loss(spec, data.y, device, torch)
        self.sums_t = torch.zeros(2, device=device)
        # bf16, fp16: the forward and loss under autocast (no GradScaler)
        self._autocast = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.precision)
        self.device = device
        n = len(data.x)
        # the graph replays full batches only
        self.images = (n // batch) * batch if variant == "cuda-graph" and n >= batch else n
        self._generator = torch.Generator(device="cpu").manual_seed(seed)
        self._graph = None

    def _step(self, xb, yb):
        self.opt.zero_grad(set_to_none=self.variant != "cuda-graph")  # a graph keeps its grads
        if self._autocast is not None:
            with self.torch.autocast("cuda", dtype=self._autocast):
                out = self.model(xb)
                loss = self.loss_fn(out.float(), yb)
        else:
            out = self.model(xb)
            loss = self.loss_fn(out, yb)
        loss.backward()
        self.opt.step()
        with self.torch.no_grad():
            self.sums_t += self.torch.stack([loss.detach() * len(xb),
                                             self.correct_fn(out, yb).to(self.sums_t.dtype)])

    def warm_up(self):
        torch, batch, n = self.torch, self.batch, len(self.xs)
        if self.variant == "cuda-graph":
            self.static_x = self.xs[:batch].clone()
            self.static_y = self.ys[:batch].clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    self._step(self.static_x, self.static_y)
            torch.cuda.current_stream().wait_stream(side)
            self._graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self._graph):
                self._step(self.static_x, self.static_y)
            self._graph.replay()
        else:
            self._step(self.xs[:batch], self.ys[:batch])
            if n > batch and n % batch:  # the last, smaller batch's shapes
                self._step(self.xs[:n % batch], self.ys[:n % batch])
        self._sync()

    def _sync(self):
        if self.gpu:
            self.torch.cuda.synchronize()

    def epoch(self, order=None, meter=None):
        torch, batch = self.torch, self.batch
        n = len(self.xs)
        if order is None:
            order = torch.randperm(n, generator=self._generator)
        else:
            order = torch.as_tensor(np.asarray(order), dtype=torch.int64)
        order = order[:self.images].to(self.device)
        self.sums_t.zero_()
        self._sync()
        if meter:
            meter.start()
        if self.gpu:
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
        start = time.perf_counter()
        if self._graph is not None:
            for lo in range(0, self.images, batch):
                idx = order[lo:lo + batch]
                self.static_x.copy_(self.xs[idx])
                self.static_y.copy_(self.ys[idx])
                self._graph.replay()
        else:
            for lo in range(0, self.images, batch):
                idx = order[lo:lo + batch]
                self._step(self.xs[idx], self.ys[idx])
        if self.gpu:
            end.record()
            end.synchronize()
        self._sums = tuple(float(v) for v in self.sums_t.tolist())  # waits for the device
        wall = time.perf_counter() - start
        if meter:
            meter.stop()
        if self.gpu:
            return begin.elapsed_time(end) / 1000.0, "cuda-events", wall
        return wall, "wall", wall

    def sums(self):
        return self._sums

    def evaluate(self, x, y):
        torch, loss_fn, correct_fn = self.torch, self.loss_fn, self.correct_fn
        xs = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2))).to(self.device)
        ys = self._targets_like(y)
        self.model.eval()
        loss_sum = correct = 0.0
        with torch.no_grad():
            for lo in range(0, len(xs), self.batch):
                out = self.model(xs[lo:lo + self.batch])
                t = ys[lo:lo + self.batch]
                loss_sum += float(loss_fn(out, t)) * len(t)
                correct += float(correct_fn(out, t))
        self.model.train()
        return loss_sum, correct

    def _targets_like(self, y):
        if self.ys.dtype == self.torch.int64:  # class indices: sparse labels, or one-hot's argmax
            labels = np.asarray(y)
            labels = labels if labels.ndim == 1 else np.argmax(labels, axis=1)
            return self.torch.from_numpy(labels.astype(np.int64)).to(self.device)
        return self.torch.from_numpy(np.asarray(y, np.float32).reshape(len(y), -1)).to(self.device)

    def parameters(self):
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def device_memory(self):
        if not self.gpu:
            return None
        return int(self.torch.cuda.max_memory_allocated()), "device (torch allocator peak)"

    def engine_memory(self):
        return None

    def notes(self):
        if self.variant == "cuda-graph" and self.images < len(self.xs):
            return ["the CUDA graph replays full batches: %d of %d images per epoch"
                    % (self.images, len(self.xs))]
        return []

    def close(self):
        self.model = self.opt = self.xs = self.ys = self._graph = None
        self.torch.backends.cudnn.allow_tf32, self.torch.backends.cuda.matmul.allow_tf32 = \
            self._tf32
        if self.gpu:
            self.torch.cuda.empty_cache()

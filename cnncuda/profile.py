"""Where a training step's time goes, per layer, on any engine:
``model.profile(x, y, batch_size=32)`` and ``python -m cnncuda.bench --profile``.

The engine times each planned step of an ordinary, unrecorded training step
(csrc/net/profile.c: CUDA events on the GPU engines' stream, a monotonic
clock on the host engines) on a copy of the model's network, so the model
is left as it was. Each planned step is a layer's forward, data gradient or
weight gradient (or several layers fused into one step, named so), the
loss, or the optimizer's update. Its FLOPs (a multiply-add counts two) and
the bytes it must at least read and write (each operand once, float32) come
from the shapes, so each row also gives the rate it achieved. Beside the
parts, an ordinary step of the same batch is timed as training runs it
(recorded as a CUDA graph on the GPU engines), so the difference between
the sum of the parts and a real step is in view.
"""
import math
import time

import numpy as np

from .checks import positive_int

__all__ = ["Profile", "profile_model", "profile_network", "plot_profiles"]

# an optimizer's update per weight: (FLOPs, the slots it reads and writes)
UPDATE_COSTS = {"sgd": (3, 1), "adagrad": (5, 1), "rmsprop": (6, 1), "adam": (10, 2),
                "adamw": (12, 2), "adamax": (8, 2), "nadam": (14, 2), "adadelta": (12, 2)}


def _out_shape(spec, shape, ins=None):
    """The output shape (no batch axis) of engine layer `spec` on `shape`
    (its first input; `ins`: all of its inputs' shapes)."""
    kind = spec["kind"]
    if kind == "input_slice":
        return tuple(spec["shape"])
    if kind == "concatenate" and ins:
        return tuple(ins[0][:-1]) + (sum(s[-1] for s in ins),)
    if kind in ("conv2d", "maxpool", "avgpool"):
        h, w, c = shape
        kh, kw = spec["kernel"]
        sh, sw = spec.get("strides", (1, 1) if kind == "conv2d" else spec["kernel"])
        if spec.get("padding", "valid") == "same":
            oh, ow = -(-h // sh), -(-w // sw)
        else:
            oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
        return (oh, ow, spec["units"] if kind == "conv2d" else c)
    if kind == "flatten":
        return (int(np.prod(shape)),)
    if kind == "dense":
        return (spec["units"],)
    if kind == "reshape":
        return tuple(spec["shape"])
    if kind in ("zero_padding2d", "cropping2d"):
        (top, bottom), (left, right) = spec["padding" if kind == "zero_padding2d" else "cropping"]
        sign = 1 if kind == "zero_padding2d" else -1
        return (shape[0] + sign * (top + bottom), shape[1] + sign * (left + right), shape[2])
    if kind == "upsampling2d":
        sh, sw = spec.get("size", (2, 2))
        return (shape[0] * sh, shape[1] * sw, shape[2])
    return tuple(shape)


def _costs(spec, shape_in, shape_out, what, n):
    """(FLOPs, bytes) of one planned step of engine layer `spec` on n samples."""
    size_in, size_out = n * int(np.prod(shape_in)), n * int(np.prod(shape_out))
    kind = spec["kind"]
    word = 4
    if kind in ("conv2d", "dense"):
        if kind == "conv2d":
            kh, kw = spec["kernel"]
            fan_in = kh * kw * shape_in[2]
            weights = fan_in * spec["units"]
        else:
            fan_in = shape_in[0]
            weights = fan_in * spec["units"]
        macs = size_out * fan_in                      # one multiply-add per weight use
        bias = size_out if spec.get("use_bias", True) else 0
        if what.startswith("forward"):
            return 2 * macs + bias, word * (size_in + weights + size_out)
        if what.startswith("backward_data"):
            return 2 * macs, word * (size_out + weights + size_in)
        if what.startswith("backward_filter"):
            return 2 * macs + bias, word * (size_in + size_out + weights)
        if what.startswith("loss"):                   # a fused head: forward, loss, gradients
            return 6 * macs, word * (2 * size_in + 2 * weights + 2 * size_out)
    if kind in ("maxpool", "avgpool"):
        kh, kw = spec["kernel"]
        window = size_out * kh * kw
        if what.startswith("forward"):
            return window, word * (size_in + 2 * size_out)
        return window, word * (2 * size_out + size_in)
    if kind == "batchnorm":
        return 8 * size_in, word * 3 * size_in
    if what.startswith("loss"):
        return 6 * size_in, word * 3 * size_in
    return size_in, word * 2 * size_in                # elementwise: activation, dropout


def _part(what):
    if what.startswith("forward"):
        return "forward"
    if what.startswith("backward_data") or what == "backward" or what.startswith("backward+"):
        return "data gradient"
    if what.startswith("backward_filter"):
        return "weight gradient"
    return "loss"


class Profile:
    """A training step's time per planned step on one engine.

    rows: one dict per planned step, in the order they run: ``step`` (the
    engine's name, e.g. ``conv2d_0.forward+relu``), ``layer`` (the model's
    layer it belongs to), ``part`` (forward, data gradient, weight gradient,
    loss or update), ``seconds``, ``flops``, ``bytes``, ``gflops`` and
    ``gbytes_per_s``. ``parts_seconds``: their sum; ``step_seconds``: an
    ordinary step of the same batch as training runs it."""

    def __init__(self, device, batch_size, rows, step_seconds, step_kind, memory_bytes,
                 layer_memory=None):
        self.device, self.batch_size, self.rows = device, batch_size, rows
        self.step_seconds, self.step_kind = step_seconds, step_kind
        self.memory_bytes = memory_bytes
        self.model = None           # the seed network's name, where the bench profiled one
        # {layer: [activation bytes, workspace bytes]} at this batch size
        self.layer_memory = layer_memory or {}
        self.parts_seconds = sum(r["seconds"] for r in rows)

    def by_layer(self):
        """{layer: {part: seconds}} in the model's order (the update last)."""
        out = {}
        for r in self.rows:
            out.setdefault(r["layer"], {}).setdefault(r["part"], 0.0)
            out[r["layer"]][r["part"]] += r["seconds"]
        return out

    def __str__(self):
        width = 96
        lines = ['Profile of a training step: %s, batch %d' % (self.device, self.batch_size),
                 "_" * width,
                 "%-34s %-16s %9s %6s %10s %9s" % ("Step (layer)", "Part", "ms/step", "%",
                                                   "GFLOP/s", "GB/s"),
                 "=" * width]
        for r in self.rows:
            lines.append("%-34s %-16s %9.3f %5.1f%% %10s %9s" % (
                ("%s (%s)" % (r["step"], r["layer"]))[:34], r["part"], 1e3 * r["seconds"],
                100.0 * r["seconds"] / self.parts_seconds if self.parts_seconds else 0.0,
                "%.1f" % r["gflops"] if r["flops"] else "",
                "%.1f" % r["gbytes_per_s"] if r["bytes"] else ""))
        lines.append("=" * width)
        lines.append("Sum of the parts: %.3f ms per step (each step run alone, unrecorded)"
                     % (1e3 * self.parts_seconds))
        lines.append("A step as training runs it (%s): %.3f ms (the parts sum to %.2fx that)"
                     % (self.step_kind, 1e3 * self.step_seconds,
                        self.parts_seconds / self.step_seconds if self.step_seconds else math.nan))
        lines.append("Engine memory: %s bytes in all; per layer, activations (and "
                     "workspace):" % "{:,}".format(self.memory_bytes))
        for layer, (activation, workspace) in self.layer_memory.items():
            extra = " (%s)" % "{:,}".format(workspace) if workspace else ""
            lines.append("  %-32s %12s%s" % (layer, "{:,}".format(activation), extra))
        lines.append("_" * width)
        return "\n".join(lines)

    def _repr_pretty_(self, printer, cycle):
        printer.text(str(self))

    def to_dict(self):
        return {"device": self.device, "batch_size": self.batch_size, "rows": self.rows,
                "parts_seconds": self.parts_seconds, "step_seconds": self.step_seconds,
                "step_kind": self.step_kind, "memory_bytes": self.memory_bytes,
                "layer_memory": self.layer_memory}

    @classmethod
    def from_dict(cls, d):
        """The Profile that to_dict gave (e.g. read back from a JSON file)."""
        p = cls(d["device"], d["batch_size"], d["rows"], d["step_seconds"], d["step_kind"],
                d["memory_bytes"], d.get("layer_memory"))
        p.model = d.get("model")
        return p

    def plot(self, path=None, ax=None):
        """This profile as a stacked bar (see plot_profiles)."""
        return plot_profiles([self], path=path, ax=ax)


def _layer_names(model):
    """The model layer's name for each engine layer index."""
    names = []
    if getattr(model, "_several_inputs", False):       # the inputs' slices first
        names = [layer.name for layer in model._input_layers]
    # (a subclassed model's model.layers is in its attributes' order: the
    # traced graph's in the engine's)
    listed = model._layers if getattr(model, "_is_subclassed", False) else model.layers
    for layer in listed:
        names.extend([layer.name] * len(layer.engine_layers()))
    # several outputs: the engine layers that pack them (functional.py)
    names.extend(["(outputs)"] * (len(model._engine_layers()) - len(names)))
    return names


def _measure_step(net, x, y, batch, steps):
    """Seconds of an ordinary training step of train_range on the batch
    (recorded on the GPU engines), best of three ranges of `steps` steps."""
    xs = np.concatenate([x] * steps)
    ys = np.concatenate([y] * steps)
    net.set_data(xs, ys)
    net.set_order(np.arange(len(xs), dtype=np.int32))
    net.train_range(0, len(xs), batch)            # records the step, first uses
    net.read_sums()
    best = math.inf
    for _ in range(3):
        began = time.perf_counter()
        net.train_range(0, len(xs), batch)
        net.read_sums()                            # waits for the engine
        seconds = getattr(net, "last_range_seconds", None)
        if seconds is None:
            seconds = time.perf_counter() - began
        best = min(best, seconds / steps)
    return best


def profile_model(model, x, y, batch_size=32, steps=10, device=None):
    """The Profile of one training step of `model` on the first batch_size
    samples of (x, y), on `device` (default: the model's engine). The
    model's weights and optimizer state are left as they were: a copy of its
    network is timed."""
    from . import config
    from .training import _data

    batch = positive_int(batch_size, "batch_size")
    steps = positive_int(steps, "steps")
    x, y = _data(model, x, y)
    if len(x) < batch:
        raise ValueError("x: expected at least batch_size (%d) samples, got %d"
                         % (batch, len(x)))
    engine = config.resolve_device(device if device is not None else model._device)
    return profile_network(engine, model._engine_layers(), model._engine_input_shape(),
                           model.loss.engine_loss(), model._compiled_optimizer, x, y, batch,
                           steps, layer_names=_layer_names(model), weights=model.get_weights(),
                           seed=model.seed)


def profile_network(engine, specs, input_shape, loss, optimizer, x, y, batch, steps,
                    layer_names=None, weights=None, seed=0):
    """The Profile of one training step of the engine network of `specs`
    (cnncuda.engine's layer dicts) on x[:batch], y[:batch], made anew on
    `engine` (with `weights` where given). layer_names: the name of each
    engine layer's model layer (default: the engine's own, e.g. conv2d_0)."""
    from .engine import make_net

    x = np.ascontiguousarray(x[:batch], dtype=np.float32)
    y = y[:batch]
    net = make_net(engine, specs, input_shape, batch, loss, optimizer, seed=seed)
    if weights is not None:
        net.set_weights(weights)
    parts = net.profile(x, y, steps=steps)
    shapes, outs = [], []
    for i, spec in enumerate(specs):     # each on what it reads (a graph's "inputs")
        ins = [tuple(input_shape) if j < 0 else outs[j] for j in spec.get("inputs") or [i - 1]]
        outs.append(_out_shape(spec, ins[0], ins))
        shapes.append((ins[0], outs[-1]))
    n_params = sum(int(np.prod(w.shape)) for w in net.get_weights())
    rows = []
    for step, seconds in parts:
        if step == "optimizer":
            kind = optimizer["kind"]
            per_weight, slots = UPDATE_COSTS.get(kind, (10, 2))
            flops = n_params * per_weight
            moved = n_params * 4 * (3 + 2 * slots)        # read p, g, slots; write p, slots
            layer, part = kind, "update"
        else:
            # "<kind>_<engine layer>.<what>": a fused step ("+relu") is
            # counted as its first layer's op (the ReLU's pass is the one
            # the fusion saves)
            head, what = step.split(".", 1)
            index = int(head.rsplit("_", 1)[1])
            layer = layer_names[index] if layer_names else head
            part = _part(what)
            flops, moved = _costs(specs[index], shapes[index][0], shapes[index][1], what, batch)
        rows.append({"step": step, "layer": layer, "part": part, "seconds": seconds,
                     "flops": flops, "bytes": moved,
                     "gflops": flops / seconds / 1e9 if seconds > 0 else 0.0,
                     "gbytes_per_s": moved / seconds / 1e9 if seconds > 0 else 0.0})
    memory = {}
    for i, (activation, workspace) in enumerate(net.layer_bytes()):
        name = layer_names[i] if layer_names else "%s_%d" % (specs[i]["kind"], i)
        held = memory.setdefault(name, [0, 0])
        held[0] += activation
        held[1] += workspace
    step_seconds = _measure_step(net, x, y, batch, steps)
    kind = "recorded" if engine.split(":")[0] in ("cuda", "cudnn") else "train_range"
    return Profile(engine, batch, rows, step_seconds, kind, net.memory_bytes, memory)


def plot_profiles(profiles, path=None, ax=None):
    """Stacked bars, one per profile (engines side by side): each layer's
    forward, data gradient and weight gradient, the loss and the update. Two
    panels: milliseconds per step (the ordinary step's time marked by a
    black line), and each part's share of the step, so that engines a
    hundred times apart can be compared in the same picture. Shown inline in
    Jupyter (returns the figure, made without pyplot as the bench's plots
    are); saved as PNG when `path` is given. ax: a pair of matplotlib axes to
    draw into instead."""
    from .bench.plot import _figure
    colors = {"forward": "#4477aa", "data gradient": "#ee6677", "weight gradient": "#228833",
              "loss": "#ccbb44", "update": "#aa3377"}
    if ax is None:
        ax = _figure(2.0 + 1.2 * len(profiles), 7.5).subplots(2, 1, sharex=True)
    fig = ax[0].figure
    top = max(p.parts_seconds for p in profiles)
    seen = set()
    for i, p in enumerate(profiles):
        ms_bottom = share_bottom = 0.0
        for r in p.rows:
            ms = 1e3 * r["seconds"]
            share = 100.0 * r["seconds"] / p.parts_seconds
            label = r["part"] if r["part"] not in seen else None
            seen.add(r["part"])
            for axis, height, bottom in ((ax[0], ms, ms_bottom), (ax[1], share, share_bottom)):
                axis.bar(i, height, bottom=bottom, color=colors[r["part"]], edgecolor="white",
                         linewidth=0.3, label=label if axis is ax[0] else None)
            if r["seconds"] > 0.06 * top:
                ax[0].text(i, ms_bottom + ms / 2, r["layer"], ha="center", va="center",
                           fontsize=6, color="white")
            if share > 6.0:
                ax[1].text(i, share_bottom + share / 2, r["layer"], ha="center", va="center",
                           fontsize=6, color="white")
            ms_bottom += ms
            share_bottom += share
        ax[0].plot([i - 0.45, i + 0.45], [1e3 * p.step_seconds] * 2, color="black", lw=1)
        ax[0].text(i, ms_bottom, "%.3g ms" % ms_bottom, ha="center", va="bottom", fontsize=7)
    ax[1].set_xticks(range(len(profiles)))
    ax[1].set_xticklabels(["%s\nbatch %d" % (p.device, p.batch_size) for p in profiles])
    ax[0].set_ylabel("ms per training step")
    ax[1].set_ylabel("% of the step")
    ax[1].set_ylim(0, 100)
    ax[0].set_title("A training step, per layer (black line: a step as training runs it)",
                    fontsize=9)
    ax[0].legend(fontsize=7)
    fig.tight_layout()
    if path:
        fig.savefig(path, dpi=120)
    return fig


def main(argv=None):
    """``python -m cnncuda.profile ROWS.json PLOT.png``: the plot of profiles
    written by ``python -m cnncuda.bench --profile --json ROWS.json`` (made
    where matplotlib is, e.g. from a GPU machine's rows)."""
    import json
    import sys
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.exit(main.__doc__)
    with open(args[0]) as f:
        profiles = [Profile.from_dict(d) for d in json.load(f)]
    fig = plot_profiles(profiles)
    fig.axes[1].set_xticklabels(["%s\n%s\nbatch %d" % (p.model or "", p.device, p.batch_size)
                                 for p in profiles], fontsize=7)
    fig.savefig(args[1], dpi=120)
    print("plot written to %s" % args[1])


if __name__ == "__main__":
    main()

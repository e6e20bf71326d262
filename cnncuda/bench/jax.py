"""The same seed network in JAX, with a jitted training step, for rows
measured side by side with ours.

Only used when jax is importable; nothing in cnncuda needs it, and it needs
nothing but jax (no flax or optax: the layers are jax.lax and jax.numpy, Adam
is written out). The network follows docs/semantics.md -- channels-last
images and Keras's kernel layouts, the same losses, accuracy counts and
Keras's form of Adam -- so from the same initial weights (``weights``: a
cnncuda network's ``get_weights()``) it trains as our engines do, up to
float32 rounding (dropout masks excepted: they come from JAX's own random
numbers); without them it starts from its own Glorot-uniform draw.

The training set is put on JAX's default device once; each step is one call
of a jitted function that gathers its batch by index from the epoch's order
on the device, runs forward, loss, backward and Adam, and adds the loss and
the correct count to sums kept on the device. An epoch is timed by the wall
clock between two waits for the device (``block_until_ready``): JAX has no
CUDA events to read. Strict float32: matrix products and convolutions run at
``precision=HIGHEST`` (XLA may otherwise use TF32 on the GPU, where our
engines do not). With ``precision='tf32'`` (the bench's ``--precision
tf32``, beside our GPU engines in TF32) a GPU runner leaves JAX's default
matmul precision instead, which lets XLA use TF32 there, and is labelled
``jax-gpu-tf32``; on the CPU it stays at HIGHEST, float32.
"""
import functools
import math
import os
import time

import numpy as np

from .cnncuda import row_label, row_precision
from ..seeds import seed_network

__all__ = ["available", "JaxRunner"]

_EPS = 1e-7


def available():
    try:
        import jax  # noqa: F401
    except ImportError:
        return False
    return True


def _pool_params(layer):
    kh, kw = layer["kernel"]
    sh, sw = layer.get("strides") or (kh, kw)
    return (1, kh, kw, 1), (1, sh, sw, 1), layer.get("padding", "valid").upper()


def _init_params(spec, weights, seed):
    """Trainable parameters and batchnorm state, per layer, in Keras layouts:
    from `weights` (a list in get_weights() order) or drawn Glorot-uniform."""
    rng = np.random.default_rng(seed)
    given = list(weights) if weights is not None else None
    shape = tuple(spec["input_shape"])
    params, state = [], []

    def take(default):
        if given is None:
            return default
        value = np.asarray(given.pop(0), np.float32)
        if value.shape != default.shape:
            raise ValueError("weights: expected an array of shape %s, got %s"
                             % (default.shape, value.shape))
        return value

    def glorot(dims, fan_in, fan_out):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, dims).astype(np.float32)

    for layer in spec["layers"]:
        kind = layer["kind"]
        p, s = {}, {}
        if kind == "conv2d":
            kh, kw = layer["kernel"]
            c, f = shape[2], layer["units"]
            p["kernel"] = take(glorot((kh, kw, c, f), kh * kw * c, kh * kw * f))
            if layer.get("use_bias", True):
                p["bias"] = take(np.zeros(f, np.float32))
            sh, sw = layer.get("strides") or (1, 1)
            if layer.get("padding", "valid") == "same":
                shape = (-(-shape[0] // sh), -(-shape[1] // sw), f)
            else:
                shape = ((shape[0] - kh) // sh + 1, (shape[1] - kw) // sw + 1, f)
        elif kind in ("maxpool", "avgpool"):
            window, strides, padding = _pool_params(layer)
            if padding == "SAME":
                shape = (-(-shape[0] // strides[1]), -(-shape[1] // strides[2]), shape[2])
            else:
                shape = ((shape[0] - window[1]) // strides[1] + 1,
                         (shape[1] - window[2]) // strides[2] + 1, shape[2])
        elif kind == "flatten":
            shape = (int(np.prod(shape)),)
        elif kind == "dense":
            p["kernel"] = take(glorot((shape[0], layer["units"]), shape[0], layer["units"]))
            if layer.get("use_bias", True):
                p["bias"] = take(np.zeros(layer["units"], np.float32))
            shape = (layer["units"],)
        elif kind == "batchnorm":
            c = shape[-1]
            p["gamma"] = take(np.ones(c, np.float32))
            p["beta"] = take(np.zeros(c, np.float32))
            s["mean"] = take(np.zeros(c, np.float32))
            s["var"] = take(np.ones(c, np.float32))
        elif kind not in ("activation", "dropout"):
            raise ValueError("bench_jax: layer kind %r not supported" % kind)
        params.append(p)
        state.append(s)
    if given:
        raise ValueError("weights: %d arrays more than the network has" % len(given))
    return params, state


def _forward(jax, spec, params, state, x, train, key):
    """(output, new batchnorm state) of the network on a batch x (NHWC)."""
    jnp, lax = jax.numpy, jax.lax
    new_state = []
    for i, (layer, p, s) in enumerate(zip(spec["layers"], params, state)):
        kind = layer["kind"]
        if kind == "conv2d":
            x = lax.conv_general_dilated(x, p["kernel"], tuple(layer.get("strides") or (1, 1)),
                                         layer.get("padding", "valid").upper(),
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
            if "bias" in p:
                x = x + p["bias"]
        elif kind == "maxpool":
            window, strides, padding = _pool_params(layer)
            x = lax.reduce_window(x, -jnp.inf, lax.max, window, strides, padding)
        elif kind == "avgpool":  # divided by the in-image elements of each window
            window, strides, padding = _pool_params(layer)
            total = lax.reduce_window(x, 0.0, lax.add, window, strides, padding)
            count = lax.reduce_window(jnp.ones_like(x[:1]), 0.0, lax.add, window, strides,
                                      padding)
            x = total / count
        elif kind == "flatten":
            x = x.reshape(x.shape[0], -1)
        elif kind == "dense":
            x = x @ p["kernel"]
            if "bias" in p:
                x = x + p["bias"]
        elif kind == "activation":
            act = layer["activation"]
            if act == "relu":
                x = jnp.maximum(x, 0.0)
            elif act == "sigmoid":
                x = jax.nn.sigmoid(x)
            elif act == "tanh":
                x = jnp.tanh(x)
            elif act == "softmax":
                x = jax.nn.softmax(x, axis=-1)
        elif kind == "dropout" and train and layer["rate"] > 0:
            keep = jax.random.uniform(jax.random.fold_in(key, i), x.shape) >= layer["rate"]
            x = jnp.where(keep, x * np.float32(1.0 / (1.0 - layer["rate"])), 0.0)
        elif kind == "batchnorm":
            axes = tuple(range(x.ndim - 1))
            eps, momentum = layer.get("epsilon", 1e-3), layer.get("momentum", 0.99)
            if train:
                mean, var = x.mean(axes), x.var(axes)
                s = {"mean": s["mean"] * momentum + lax.stop_gradient(mean) * (1 - momentum),
                     "var": s["var"] * momentum + lax.stop_gradient(var) * (1 - momentum)}
            else:
                mean, var = s["mean"], s["var"]
            x = p["gamma"] * (x - mean) / jnp.sqrt(var + eps) + p["beta"]
        new_state.append(s)
    return x, new_state


def _loss_and_correct(jax, loss, out, t):
    """(mean loss, correct count) of a batch, as docs/semantics.md defines them."""
    jnp = jax.numpy
    kind, logits = loss["kind"], loss.get("from_logits", False)
    if kind in ("sparse_categorical_crossentropy", "categorical_crossentropy"):
        onehot = jax.nn.one_hot(t, out.shape[-1], dtype=out.dtype) if kind.startswith("sparse") \
            else t
        if logits:
            lse = jax.nn.logsumexp(out, axis=-1)
            per = onehot.sum(-1) * lse - (onehot * out).sum(-1)
        else:
            q = jnp.clip(out / out.sum(-1, keepdims=True), _EPS, 1 - _EPS)
            per = -(onehot * jnp.log(q)).sum(-1)
        labels = t if kind.startswith("sparse") else jnp.argmax(t, axis=-1)
        correct = (jnp.argmax(out, axis=-1) == labels).sum()
    else:
        if logits:
            per = (jnp.maximum(out, 0) - out * t + jnp.log1p(jnp.exp(-jnp.abs(out)))).mean(-1)
        else:
            p = jnp.clip(out, _EPS, 1 - _EPS)
            per = -(t * jnp.log(p) + (1 - t) * jnp.log(1 - p)).mean(-1)
        correct = ((out > (0.0 if logits else 0.5)) == (t > 0.5)).mean(-1).sum()
    return per.mean(), correct.astype(out.dtype)


def _adam(jax, opt, params, grads, m, v, t):
    """Keras's Adam, step t (from 1), over every trainable array."""
    jnp = jax.numpy
    b1, b2, lr, eps = opt["beta_1"], opt["beta_2"], opt["learning_rate"], opt["epsilon"]
    tf = t.astype(jnp.float32)
    lr_t = lr * jnp.sqrt(1 - b2 ** tf) / (1 - b1 ** tf)
    m = jax.tree_util.tree_map(lambda m_, g: m_ + (g - m_) * (1 - b1), m, grads)
    v = jax.tree_util.tree_map(lambda v_, g: v_ + (g * g - v_) * (1 - b2), v, grads)
    params = jax.tree_util.tree_map(lambda p, m_, v_: p - lr_t * m_ / (jnp.sqrt(v_) + eps),
                                    params, m, v)
    return params, m, v


class JaxRunner:
    """Seed `model` in JAX on its default device, training on `data` (a
    BenchData) at batch size `batch`; `weights`: initial weights in cnncuda's
    get_weights() order (default: drawn from `seed`)."""

    framework = "jax"

    def __init__(self, model, data, batch, seed=0, weights=None, precision="float32"):
        row_precision(False, precision)  # checks the argument
        if precision in ("bf16", "fp16"):
            precision = "float32"           # no 16-bit JAX row: float32, labelled so
        # XLA takes 75% of a GPU's memory when its backend starts unless told
        # not to: the other rows of the run need theirs, and the peak shown
        # should be what this row used
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax
        self.jax = jax
        jnp = jax.numpy
        spec = seed_network(model)
        if spec["optimizer"]["kind"] != "adam":
            raise ValueError("bench_jax: optimizer %r not supported (Adam only)"
                             % spec["optimizer"]["kind"])
        self.spec = spec
        self.platform = jax.default_backend()
        self.gpu = self.platform in ("gpu", "cuda", "rocm")
        self.precision = row_precision(self.gpu, precision)
        # 'highest': strict float32; None: JAX's default (TF32 on the GPU).
        # Set for every runner, before its step is traced: the setting is
        # process-wide and read when jit traces.
        jax.config.update("jax_default_matmul_precision",
                          None if self.precision == "tf32" else "highest")
        self.name = row_label("jax-" + ("gpu" if self.gpu else self.platform), self.precision)
        self.version = jax.__version__
        self.batch = batch
        self.images = len(data.x)
        self._device = jax.devices()[0]
        params, state = _init_params(spec, weights, seed)
        put = functools.partial(jax.device_put, device=self._device)
        self.params = put(params)
        self.state = put(state)
        zeros = jax.tree_util.tree_map(jnp.zeros_like, self.params)
        self.m, self.v = zeros, jax.tree_util.tree_map(jnp.zeros_like, self.params)
        self.t = 0
        self.sums_d = put(np.zeros(2, np.float32))
        self.xs = put(np.ascontiguousarray(data.x, np.float32))
        self.ys = put(np.asarray(data.y))
        self._key = jax.random.PRNGKey(seed)
        self._rng = np.random.default_rng(seed)
        self._sums = (0.0, 0.0)
        # CPU buffers cannot be donated; elsewhere the step updates in place
        donate = () if self.platform == "cpu" else (0, 1, 2, 3, 4)
        self._step = jax.jit(self._step_fn, static_argnames=("size",), donate_argnums=donate)
        self._eval = jax.jit(self._eval_fn)

    def _step_fn(self, params, state, m, v, sums, xs, ys, order, start, t, size):
        jax = self.jax
        idx = jax.lax.dynamic_slice(order, (start,), (size,))
        xb, yb = xs[idx], ys[idx]
        key = jax.random.fold_in(self._key, t)

        def loss_of(p):
            out, new_state = _forward(jax, self.spec, p, state, xb, True, key)
            loss, correct = _loss_and_correct(jax, self.spec["loss"], out, yb)
            return loss, (new_state, correct)

        (loss, (state, correct)), grads = jax.value_and_grad(loss_of, has_aux=True)(params)
        params, m, v = _adam(jax, self.spec["optimizer"], params, grads, m, v, t + 1)
        sums = sums + jax.numpy.stack([loss * size, correct])
        return params, state, m, v, sums

    def _eval_fn(self, params, state, x, y):
        out, _ = _forward(self.jax, self.spec, params, state, x, False, None)
        loss, correct = _loss_and_correct(self.jax, self.spec["loss"], out, y)
        return loss * x.shape[0], correct

    def _run(self, order, start, count):
        """Steps over order[start:start+count] (a device array)."""
        for lo in range(start, start + count, self.batch):
            size = min(self.batch, start + count - lo)
            self.params, self.state, self.m, self.v, self.sums_d = self._step(
                self.params, self.state, self.m, self.v, self.sums_d, self.xs, self.ys, order,
                lo, self.t, size=size)
            self.t += 1

    def warm_up(self):
        """Compiles the step for a full batch and, where the epoch ends with a
        smaller one, for that size too (two steps trained), then waits."""
        order = self.jax.device_put(np.arange(self.images, dtype=np.int32), self._device)
        n, batch = self.images, self.batch
        self._run(order, 0, min(batch, n))
        if n > batch and n % batch:
            self._run(order, 0, n % batch)
        self.jax.block_until_ready(self.sums_d)

    def epoch(self, order=None, meter=None):
        order = self._rng.permutation(self.images) if order is None else np.asarray(order)
        order = self.jax.device_put(order.astype(np.int32), self._device)
        self.sums_d = self.jax.device_put(np.zeros(2, np.float32), self._device)
        self.jax.block_until_ready((order, self.sums_d, self.params))
        if meter:
            meter.start()
        start = time.perf_counter()
        self._run(order, 0, self.images)
        sums = np.asarray(self.sums_d)  # waits for the device
        wall = time.perf_counter() - start
        if meter:
            meter.stop()
        self._sums = (float(sums[0]), float(sums[1]))
        return wall, "wall", wall

    def sums(self):
        return self._sums

    def evaluate(self, x, y):
        loss_sum = correct = 0.0
        for lo in range(0, len(x), self.batch):
            loss, right = self._eval(self.params, self.state, x[lo:lo + self.batch],
                                     y[lo:lo + self.batch])
            loss_sum += float(loss)
            correct += float(right)
        return loss_sum, correct

    def get_weights(self):
        """The weights now, in cnncuda's get_weights() order and layouts."""
        out = []
        for layer, p, s in zip(self.spec["layers"], self.params, self.state):
            names = {"conv2d": ("kernel", "bias"), "dense": ("kernel", "bias")}.get(
                layer["kind"], ("gamma", "beta") if layer["kind"] == "batchnorm" else ())
            out += [np.asarray(p[k]) for k in names if k in p]
            if layer["kind"] == "batchnorm":
                out += [np.asarray(s["mean"]), np.asarray(s["var"])]
        return out

    def parameters(self):
        return int(sum(math.prod(a.shape) for a in self.jax.tree_util.tree_leaves(self.params)))

    def device_memory(self):
        if not self.gpu:
            return None
        stats = self._device.memory_stats() or {}
        peak = stats.get("peak_bytes_in_use")
        return (int(peak), "device (XLA allocator peak)") if peak is not None else None

    def engine_memory(self):
        return None

    def notes(self):
        notes = ["timed by the wall clock (JAX has no CUDA events)"] if self.gpu else []
        if self.platform == "cpu":
            notes.append("XLA's CPU threads (all cores)")
        return notes

    def close(self):
        self.params = self.state = self.m = self.v = self.xs = self.ys = None

"""One bench row: warm up a runner, time its epochs, print Keras-style
progress, and gather seconds, accuracy, memory and energy into a dict.

A runner (bench_cnncuda.EngineRunner, bench_torch.TorchRunner,
bench_jax.JaxRunner) has ``name``, ``framework``, ``version``, ``gpu``,
``images``, ``warm_up()``, ``epoch(meter=...)`` -> (seconds, timer,
wall_seconds), ``sums()``, ``evaluate(x, y)``, ``parameters()``,
``device_memory()``, ``engine_memory()``, ``notes()``, ``close()`` and
``precision`` ('float32', 'tf32', 'bf16' or 'fp16', the row's; 'float32' where
absent).
Validation runs after each timed epoch, outside the timing.

Progress as Keras draws it: "Epoch 1/3", then, with verbose=1, the bar
redrawn in place during the epoch where the output is a terminal or a
Jupyter kernel (``log`` left as print, and a runner with ``draws_progress``:
cnncuda's engines; the PyTorch and JAX rows show the final line only), and
the final line with the epoch's measured time. Elsewhere (a file, a pipe,
another ``log``) the epoch is one engine call and only the final line is
written.
"""
import math

from .memory import HostPeak
from .nvml import nvml
from ..progbar import Progbar, format_time

__all__ = ["time_row", "EnergyMeter", "keras_epoch_line"]


class EnergyMeter:
    """The GPU's energy counter read at start() and stop(); ``joules`` is the
    difference, or None where the driver does not report it."""

    def __init__(self, source):
        self._source = source
        self._start = self.joules = None

    def start(self):
        self._start = self._source.energy_mj()

    def stop(self):
        end = self._source.energy_mj()
        if self._start is not None and end is not None:
            self.joules = (end - self._start) / 1000.0


def _value(value):
    return " %.4f" % value if abs(value) > 1e-3 else " %.4e" % value


def keras_epoch_line(steps, seconds, logs, verbose=1):
    """The line Keras writes at the end of an epoch (verbose 1 or 2)."""
    values = "".join(" - %s:%s" % (k, _value(v)) for k, v in logs.items())
    per_step = format_time(seconds / max(1, steps), "step")
    if verbose == 2:
        return "%d/%d - %.0fs%s -%s -%s" % (steps, steps, seconds, values,
                                            format_time(seconds, "epoch"), per_step)
    return "%d/%d [%s] - %.0fs%s%s" % (steps, steps, "=" * 30, seconds, per_step, values)


def _in_place_bar(runner, steps, log, verbose):
    """A Progbar to redraw during the epoch, or None where none is drawn in
    place (see the module docstring)."""
    if verbose != 1 or log is not print or not getattr(runner, "draws_progress", False):
        return None
    bar = Progbar(steps)
    return bar if bar.dynamic else None


def time_row(make_runner, model, batch, data, epochs, log=print, verbose=1):
    """Builds a runner with ``make_runner()`` and returns its row dict."""
    peak = HostPeak().start()
    runner = make_runner()
    try:
        runner.warm_up()
        steps = math.ceil(runner.images / batch)
        history = []
        for epoch in range(epochs):
            meter = EnergyMeter(nvml()) if runner.gpu else None
            if verbose:
                log("Epoch %d/%d" % (epoch + 1, epochs))
            bar = _in_place_bar(runner, steps, log, verbose)
            if bar is None:
                seconds, timer, wall = runner.epoch(meter=meter)
            else:
                seconds, timer, wall = runner.epoch(meter=meter, progress=bar)
            loss_sum, correct = runner.sums()
            entry = {"epoch": epoch + 1, "seconds": seconds, "wall_seconds": wall,
                     "loss": loss_sum / runner.images, "accuracy": correct / runner.images,
                     "joules": meter.joules if meter else None}
            if len(data.x_val):
                val_loss, val_correct = runner.evaluate(data.x_val, data.y_val)
                entry["val_loss"] = val_loss / len(data.x_val)
                entry["val_accuracy"] = val_correct / len(data.x_val)
            history.append(entry)
            if verbose:
                logs = {k: entry[k] for k in ("loss", "accuracy", "val_loss", "val_accuracy")
                        if k in entry}
                line = keras_epoch_line(steps, seconds, logs, verbose)
                if bar is None:
                    log(line)
                else:
                    bar.finish(line)
        best = min(history, key=lambda h: h["seconds"])
        last = history[-1]
        joules = [h["joules"] for h in history if h["joules"] is not None]
        device_memory = runner.device_memory()
        host_peak = peak.bytes()
        row = {
            "model": model, "device": runner.name, "framework": runner.framework,
            "framework_version": runner.version,
            "precision": getattr(runner, "precision", "float32"), "batch_size": batch,
            "images": runner.images, "steps": steps, "epochs": epochs,
            "data": data.kind, "dataset": data.dataset, "data_note": data.note,
            "parameters": runner.parameters(),
            "seconds_per_epoch": best["seconds"], "timer": timer,
            "wall_seconds_per_epoch": min(h["wall_seconds"] for h in history),
            "images_per_second": runner.images / best["seconds"],
            "ms_per_step": 1000.0 * best["seconds"] / steps,
            "final_loss": last["loss"], "final_accuracy": last["accuracy"],
            "val_images": len(data.x_val),
            "val_loss": last.get("val_loss"), "val_accuracy": last.get("val_accuracy"),
            "joules_per_epoch": sum(joules) / len(joules) if joules else None,
            "host_peak_bytes": host_peak, "host_peak_kind": peak.kind,
            "engine_memory_bytes": runner.engine_memory(),
            "peak_memory_bytes": host_peak, "peak_memory_kind": peak.kind,
            "notes": runner.notes(),
            "history": history,
        }
        if runner.gpu:  # the GPU rows show device memory, or nothing
            row["peak_memory_bytes"], row["peak_memory_kind"] = device_memory or (None, None)
            if device_memory is None:
                row["notes"].append("device memory not reported")
    finally:
        runner.close()
    return row

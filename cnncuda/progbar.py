"""Keras's progress bar, line for line.

verbose=1, at the end of an epoch::

    1563/1563 [==============================] - 8s 5ms/step - accuracy: 0.4473 - loss: 1.5175 - val_accuracy: 0.5537 - val_loss: 1.2493

and while it runs ``  32/1563 [..............................] - ETA: 1:02 - loss: 2.3010 - ...``
redrawn in place where the output is a terminal or a Jupyter notebook (an
ipykernel is loaded); in a file or a pipe only the final line of each epoch
is written. verbose=2 writes one line per epoch::

    1563/1563 - 8s - accuracy: 0.4473 - loss: 1.5175 - 8s/epoch - 5ms/step

Redraws are throttled to one per ``interval`` seconds (Keras's 0.05 s); the
caller asks ``due()`` before it reads the engine's sums, so the bar costs no
device synchronisation between redraws.
"""
import os
import sys
import time

__all__ = ["Progbar", "dynamic_display", "format_time"]


def dynamic_display(stream=None):
    """Whether the output can be redrawn in place: a terminal, a Jupyter
    kernel, or PyCharm's console (as Keras decides)."""
    stream = stream or sys.stdout
    isatty = getattr(stream, "isatty", None)
    try:
        tty = bool(isatty and isatty())
    except ValueError:  # a closed stream
        tty = False
    return tty or "ipykernel" in sys.modules or "PYCHARM_HOSTED" in os.environ


def format_time(seconds, unit):
    """' 5ms/step', ' 8s/epoch', ' 95us/step' as Keras writes durations."""
    if seconds >= 1 or seconds == 0:
        return " %.0fs/%s" % (seconds, unit)
    if seconds >= 1e-3:
        return " %.0fms/%s" % (seconds * 1e3, unit)
    return " %.0fus/%s" % (seconds * 1e6, unit)


def _format_value(value, verbose):
    if isinstance(value, str):
        return " " + value
    if isinstance(value, (list, tuple)):     # several thresholds: their mean, as Keras
        value = sum(value) / max(len(value), 1)
    large = abs(value) > 1e-3 if verbose == 1 else value > 1e-3
    return " %.4f" % value if large else " %.4e" % value


class Progbar:
    """Progbar(target, verbose=1): call ``update(current, values)`` with the
    number of steps done (target None: not known yet, drawn "k/Unknown") and a list of (name, mean value) pairs, and
    ``update(target, values, finalize=True)`` once at the end."""

    def __init__(self, target, width=30, verbose=1, interval=0.05, unit_name="step",
                 stream=None, dynamic=None):
        self.target = target
        self.width = width
        self.verbose = verbose
        self.interval = interval
        self.unit_name = unit_name
        self._stream = stream
        self.dynamic = dynamic_display(self.stream) if dynamic is None else dynamic
        self._start = time.perf_counter()
        self._last_update = None
        self._after_first_step = None
        self._total_width = 0

    @property
    def stream(self):
        return self._stream or sys.stdout

    def due(self, now=None):
        """Whether an update now would be drawn (verbose=1, in place, and at
        least ``interval`` since the last one)."""
        if self.verbose != 1 or not self.dynamic:
            return False
        now = time.perf_counter() if now is None else now
        return self._last_update is None or now - self._last_update >= self.interval

    def _step_seconds(self, current, now):
        if not current:
            return 0.0
        if self._after_first_step is not None and current > 1:
            per_step = (now - self._after_first_step) / (current - 1)
        else:
            per_step = (now - self._start) / current
        if current == 1:
            self._after_first_step = now
        return per_step

    def _bar(self, current):
        if self.target is None:     # a dataset of unknown length, in its first epoch
            return "%7d/Unknown" % current
        digits = len(str(self.target))
        text = "%*d/%d [" % (digits, current, self.target)
        filled = int(self.width * current / self.target) if self.target else self.width
        if filled > 0:
            text += "=" * (filled - 1) + (">" if current < self.target else "=")
        return text + "." * (self.width - filled) + "]"

    def update(self, current, values=(), finalize=None):
        """Draws the bar for `current` steps done, when due (or at the end)."""
        if finalize is None:
            finalize = self.target is not None and current >= self.target
        now = time.perf_counter()
        values = list(values.items()) if isinstance(values, dict) else list(values)
        if self.verbose == 1:
            if not finalize and not self.due(now):
                return
            if not finalize or self.dynamic:
                message = "\r"
            else:
                message = ""
            bar = self._bar(current)
            per_step = self._step_seconds(current, now)
            if finalize or self.target is None:
                info = " - %.0fs" % (now - self._start) + format_time(per_step, self.unit_name)
            else:
                eta = per_step * (self.target - current)
                if eta > 3600:
                    shown = "%d:%02d:%02d" % (eta // 3600, (eta % 3600) // 60, eta % 60)
                elif eta > 60:
                    shown = "%d:%02d" % (eta // 60, eta % 60)
                else:
                    shown = "%ds" % eta
                info = " - ETA: " + shown
            for name, value in values:
                info += " - %s:" % name + _format_value(value, 1)
            line = bar + info
            padding = max(0, self._total_width - len(line)) if self.dynamic else 0
            self._total_width = len(line)
            message += line + " " * padding + ("\n" if finalize else "")
            self._write(message)
        elif self.verbose == 2 and finalize:
            target = current if self.target is None else self.target
            digits = len(str(target))
            epoch_seconds = now - self._start
            info = "%*d/%d - %.0fs" % (digits, current, target, epoch_seconds)
            for name, value in values:
                info += " - %s:" % name + _format_value(value, 2)
            info += " -" + format_time(epoch_seconds, "epoch")
            info += " -" + format_time(epoch_seconds / max(1, target), self.unit_name)
            self._write(info + "\n")
        self._last_update = now

    def finish(self, line):
        """Ends the bar with the caller's own last `line` (the bench's, with
        its measured seconds), written over the bar where it is redrawn in
        place, then a newline."""
        padding = max(0, self._total_width - len(line)) if self.dynamic else 0
        self._write(("\r" if self.dynamic else "") + line + " " * padding + "\n")
        self._total_width = 0
        self._last_update = time.perf_counter()

    def _write(self, text):
        stream = self.stream
        stream.write(text)
        flush = getattr(stream, "flush", None)
        if flush:
            flush()

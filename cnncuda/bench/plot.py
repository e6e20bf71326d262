"""Plots of bench rows (matplotlib, an optional dependency:
``pip install "cnncuda[bench]"``).

- ``speedup_plot``: seconds per epoch per engine, one row each, labelled
  with the seconds and the speedup over the sequential ``cpu`` engine; one
  panel per model, batch size and data set; published figures can be drawn
  beside them (grey: another machine).
- ``curves_plot``: training loss, training and validation accuracy per epoch.
- ``stages_plot``: seconds per optimisation stage (bench_stages), labelled
  with the speedup over each group's first stage.

Where the slowest row of a panel is at most 20 times the fastest, the axis
is linear and the rows are bars: their lengths are in the ratio of the
times. Beyond that the axis is logarithmic and the rows are dots, since a
bar's length on a log axis shows no ratio; ticks are labelled in seconds
either way. Footnotes say what a reader could misread: a speedup below 1
(slower than ``cpu``, in red), a row that ran more threads than the
machine's cores (marked ``*``), synthetic data.

Figures are made without pyplot (no display needed, none kept open by
pyplot); the returned Figure shows itself in a notebook -- IPython, in
Jupyter and in Colab, displays its PNG -- so a cell that ends with a plot
call shows the plot. ``python -m cnncuda.bench.plot rows.json out.png``
redraws a saved run.
"""
import io
import json
import math
import sys
import textwrap

from .table import _rate, data_label, group_key

__all__ = ["speedup_plot", "curves_plot", "stages_plot", "main"]

_COLORS = {"host": "#4c72b0", "gpu": "#55a868", "torch": "#dd8452", "jax": "#8172b3"}
_FAMILIES = {"host": "cnncuda, CPU", "gpu": "cnncuda, GPU", "torch": "PyTorch", "jax": "JAX"}
_PUBLISHED = "#bbbbbb"
_WARN = "#b00000"       # slower than the baseline, more threads than cores
_SYNTHETIC = "#b35900"
_LINEAR_RATIO = 20.0    # the largest slowest/fastest ratio drawn on a linear axis
_NOTE_LINE_INCHES = 0.19
_FIGURE_CLASS = []


def _figure_class():
    """matplotlib's Figure with the PNG that IPython displays (made once)."""
    if not _FIGURE_CLASS:
        from matplotlib.figure import Figure

        class NotebookFigure(Figure):
            """A Figure that a notebook shows: IPython displays ``_repr_png_``."""

            def _repr_png_(self):
                out = io.BytesIO()
                self.savefig(out, format="png", bbox_inches="tight")
                return out.getvalue()

        _FIGURE_CLASS.append(NotebookFigure)
    return _FIGURE_CLASS[0]


def _figure(width, height):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError:
        raise ImportError("plots need matplotlib: pip install matplotlib (or "
                          "pip install \"cnncuda[bench]\")") from None
    fig = _figure_class()(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _family(row):
    framework = row.get("framework", "cnncuda")
    if framework in ("torch", "jax"):
        return framework
    return "gpu" if row["device"].partition("-")[0] in ("cuda", "cudnn") else "host"  # cuda-tf32


def _machine_line(environment):
    if not environment:
        return ""
    parts = []
    if environment.get("gpus"):
        parts.append("GPU: %s" % ", ".join(environment["gpus"]))
    parts.append("CPU: %s (%s cores)" % (environment.get("cpu", "?"), environment.get("cores", "?")))
    if environment.get("date"):
        parts.append(environment["date"][:10])
    return " | ".join(parts)


def _threads(device):
    """The CPU threads a row ran: N of 'omp:N' and 'torch-cpu:N', else None."""
    for prefix in ("omp:", "torch-cpu:"):
        if device.startswith(prefix) and device[len(prefix):].isdigit():
            return int(device[len(prefix):])
    return None


def _seconds(value, unit="s"):
    return ("%.0f %s" if value >= 100 else "%.3g %s") % (value, unit)


def _times(speedup):
    return ("%.0fx" if speedup >= 100 else "%.1fx" if speedup >= 10 else "%.2fx") % speedup


def _speedup_text(speedup, baseline):
    """(text, color) of a row's speedup over the baseline."""
    if baseline:
        return "baseline (1x)", "black"
    if speedup < 1:
        return "%s: slower" % _times(speedup), _WARN
    return "%s faster" % _times(speedup), "black"


def _value_rows(ax, values, colors, published, unit, tick_unit):
    """One row per value, top to bottom: bars on a linear axis, or dots on a
    log axis where the values span more than _LINEAR_RATIO; x ticks labelled
    in `tick_unit`. Returns where each row's label goes: just right of its
    bar, or, on a log axis, None (a column right of the panel)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter
    lo, hi = min(values), max(values)
    rows = range(len(values))
    if hi / lo > _LINEAR_RATIO:
        ax.set_xscale("log")
        for y in rows:
            ax.axhline(y, color="#e0e0e0", linewidth=0.8, zorder=0)
        for y, value, color, grey in zip(rows, values, colors, published):
            ax.scatter([value], [y], s=80, marker="D" if grey else "o", zorder=3,
                       facecolors="white" if grey else color,
                       edgecolors="#777777" if grey else "black", linewidths=1.0)
        ax.set_xlim(lo / 1.6, hi * 1.6)
        decades = math.log10(hi / lo) + 0.4
        subs = (1.0, 2.0, 5.0) if decades <= 2.5 else (1.0, 3.0) if decades <= 4 else (1.0,)
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=subs))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ends = None
        ax.set_xlabel("%s (log axis: equal distances are equal ratios)" % unit, fontsize=9)
    else:
        bars = ax.barh(list(rows), values, height=0.62, color=colors, edgecolor="black",
                       linewidth=0.5)
        for bar, grey in zip(bars, published):
            if grey:
                bar.set_hatch("//")
        ax.set_xlim(0, hi * 1.55)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
        ends = [v + hi * 0.02 for v in values]
        ax.set_xlabel("%s (bar lengths in the ratio of the times)" % unit, fontsize=9)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "%g %s" % (v, tick_unit)))
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", color="#e5e5e5", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.set_ylim(len(values) - 0.5, -0.5)
    ax.set_yticks(list(rows))
    return ends


def _label_rows(ax, ends, texts):
    """Writes each row's label (a list of (text, color) parts) right of its
    bar, or where `ends` is None in a column right of the panel."""
    from matplotlib.transforms import blended_transform_factory
    column = blended_transform_factory(ax.transAxes, ax.transData)
    for y, parts in enumerate(texts):
        if ends is None:
            line = ax.annotate(parts[0][0], (1.03, y), xycoords=column, va="center", ha="left",
                               fontsize=8, color=parts[0][1], annotation_clip=False)
        else:
            line = ax.annotate(parts[0][0], (ends[y], y), va="center", ha="left", fontsize=8,
                               color=parts[0][1])
        for text, color in parts[1:]:   # the next part starts where the last one ended
            line = ax.annotate("  " + text, xycoords=line, xy=(1, 0.5), va="center",
                               ha="left", fontsize=8, color=color)


def _grid(count, panel_width, panel_height, footer_lines):
    """(fig, axes, footer): panels two to a row, with room below them for
    `footer_lines` lines of notes."""
    cols = min(count, 2)
    rows = math.ceil(count / cols)
    footer = footer_lines * _NOTE_LINE_INCHES + (0.15 if footer_lines else 0)
    fig = _figure(panel_width * cols, panel_height * rows + 0.8 + footer)
    return fig, [fig.add_subplot(rows, cols, i + 1) for i in range(count)], footer


def _wrapped(notes, width_inches):
    """Each note as lines of about the figure's width (8-point text)."""
    chars = max(40, int(width_inches * 15))
    return [(line, color) for text, color in notes
            for line in textwrap.wrap(text, chars, subsequent_indent="   ")]


def _finish(fig, footer, lines, handles=()):
    """Lays out the panels above `footer` inches, then the legend and the
    notes (lines of (text, color)) in it."""
    height = fig.get_figheight()
    fig.tight_layout(rect=(0, footer / height, 1, 1))
    y = footer / height
    if handles:
        fig.legend(handles=list(handles), loc="upper center", bbox_to_anchor=(0.5, y),
                   ncol=min(len(handles), 4), fontsize=7, frameon=False)
        y -= 1.6 * _NOTE_LINE_INCHES / height
    for text, color in lines:
        y -= _NOTE_LINE_INCHES / height
        fig.text(0.01, y, text, fontsize=8, color=color, ha="left", va="bottom")


def _save(fig, path):
    if path:
        fig.savefig(path, bbox_inches="tight")
    return fig


def _synthetic_note(rows, times=True):
    """The note under a plot of rows on synthetic data (none for real data)."""
    if not any(r["data"] == "synthetic" for r in rows):
        return []
    why = sorted({r["data_note"] for r in rows if r["data"] == "synthetic" and r.get("data_note")})
    return [("synthetic data%s: images of the data set's shape made from class templates and "
             "noise; %sthe accuracies say nothing about the real data set"
             % (" (%s)" % "; ".join(why) if why else "", "the times hold, " if times else ""),
             _SYNTHETIC)]


def _legend_handles(families, published):
    from matplotlib.patches import Patch
    handles = [Patch(facecolor=_COLORS[f], edgecolor="black", label=_FAMILIES[f])
               for f in dict.fromkeys(families)]
    if published:
        handles.append(Patch(facecolor=_PUBLISHED, hatch="//", edgecolor="black",
                             label="published (another machine)"))
    return handles if len(handles) > 1 else []


def _cores(environment):
    """The cores of the machine that ran the rows: the environment's, or this
    machine's when no environment is given."""
    if environment is None:
        from ..runtime import _cores as here
        return here()
    return environment.get("cores")


def speedup_plot(rows, path=None, environment=None, references=(), title=None):
    """Seconds per epoch per engine, each row labelled with its seconds and
    its speedup over the cpu row of the same panel; saved as PNG to `path`
    when given; returns the Figure (which a notebook displays).
    environment: the run's bench_env.environment() (the machine line; its
    'cores' mark the rows that ran more threads than cores; None: this
    machine's cores). references: dicts {"label", "seconds_per_epoch",
    optional "model"} of published figures, drawn in grey."""
    rows = [r for r in rows if r.get("seconds_per_epoch")]
    if not rows:
        raise ValueError("rows: expected at least one bench row with seconds_per_epoch, got none")
    groups = list(dict.fromkeys(group_key(r) for r in rows))
    cores = _cores(environment)
    over = [r["device"] for r in rows if cores and (_threads(r["device"]) or 0) > cores]
    bases = {key: next((r for r in rows if group_key(r) == key and r["device"] == "cpu"), None)
             for key in groups}
    slower = any(bases[group_key(r)] is not None and _rate(r) < _rate(bases[group_key(r)])
                 for r in rows)
    notes = []
    if slower:
        notes.append(("a speedup below 1x (red) is a slowdown: that row took longer than the "
                      "sequential cpu engine", _WARN))
    if over:
        notes.append(("* %s: more threads than the %d cores of the machine that ran %s; the "
                      "threads took turns on the cores" % (", ".join(dict.fromkeys(over)), cores,
                                                           "them" if len(over) > 1 else "it"),
                      _WARN))
    notes += _synthetic_note(rows)
    most = max(sum(group_key(r) == g for r in rows) for g in groups) + len(references)
    width = 6.4 if len(groups) == 1 else 5.6
    lines = _wrapped(notes, width * min(len(groups), 2))
    families = [_family(r) for r in rows]
    handles = _legend_handles(families, bool(references))
    fig, axes, footer = _grid(len(groups), width, 0.42 * most + 1.5,
                              len(lines) + (1.6 if handles else 0))
    for ax, key in zip(axes, groups):
        mine = [r for r in rows if group_key(r) == key]
        base = bases[key]
        refs = [ref for ref in references if ref.get("model") in (None, key[0])]
        values = [r["seconds_per_epoch"] for r in mine] + [ref["seconds_per_epoch"] for ref in refs]
        colors = [_COLORS[_family(r)] for r in mine] + [_PUBLISHED] * len(refs)
        ends = _value_rows(ax, values, colors, [False] * len(mine) + [True] * len(refs),
                           "seconds per epoch", "s")
        texts = []
        for r in mine:
            parts = [(_seconds(r["seconds_per_epoch"]), "black")]
            if base is not None:
                parts.append(_speedup_text(_rate(r) / _rate(base), r is base))
            texts.append(parts)
        texts += [[(_seconds(ref["seconds_per_epoch"]), "#555555")] for ref in refs]
        _label_rows(ax, ends, texts)
        marked = [r["device"] + (" *" if r["device"] in over else "") for r in mine]
        ax.set_yticklabels(marked + [ref["label"] for ref in refs], fontsize=8)
        for tick, r in zip(ax.get_yticklabels(), mine):
            if r["device"] in over:
                tick.set_color(_WARN)
        synthetic = mine[0]["data"] == "synthetic"
        ax.set_title("%s, batch %d, %s images, %s" % (
            key[0], key[1], format(max(r["images"] for r in mine), ","),
            "SYNTHETIC data" if synthetic else "real data: %s" % mine[0].get("dataset", "?")),
            fontsize=9, color=_SYNTHETIC if synthetic else "black")
        if base is None:
            ax.text(0.5, 0.98, "no cpu row: no speedups", transform=ax.transAxes, ha="center",
                    va="top", fontsize=8, color=_WARN)
    heading = title or "Seconds per epoch; labels: speedup over the sequential cpu engine"
    machine = _machine_line(environment)
    fig.suptitle(heading + ("\n" + machine if machine else ""), fontsize=10)
    _finish(fig, footer, lines, handles)
    return _save(fig, path)


def curves_plot(rows, path=None, title=None):
    """Training loss, and training (solid) and validation (dashed) accuracy
    per epoch, one line per row; returns the Figure (which a notebook
    displays)."""
    rows = [r for r in rows if r.get("history")]
    if not rows:
        raise ValueError("rows: expected bench rows with a history, got none")
    lines = _wrapped(_synthetic_note(rows, times=False), 10)
    fig = _figure(10, 4 + len(lines) * _NOTE_LINE_INCHES)
    footer = len(lines) * _NOTE_LINE_INCHES + (0.15 if lines else 0)
    loss_ax, acc_ax = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for r in rows:
        epochs = [h["epoch"] for h in r["history"]]
        label = "%s (batch %d)" % (r["device"], r["batch_size"])
        line, = loss_ax.plot(epochs, [h["loss"] for h in r["history"]], marker="o", label=label)
        acc_ax.plot(epochs, [h["accuracy"] for h in r["history"]], marker="o",
                    color=line.get_color(), label=label + " train")
        if all("val_accuracy" in h for h in r["history"]):
            acc_ax.plot(epochs, [h["val_accuracy"] for h in r["history"]], marker="s",
                        linestyle="--", color=line.get_color(), label=label + " validation")
    loss_ax.set_xlabel("epoch")
    loss_ax.set_ylabel("training loss")
    acc_ax.set_xlabel("epoch")
    acc_ax.set_ylabel("accuracy")
    for ax in (loss_ax, acc_ax):
        ax.legend(fontsize=7)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.grid(color="#e5e5e5", linewidth=0.6)
    r0 = rows[0]
    fig.suptitle(title or "%s, %s" % (r0["model"], data_label(r0)), fontsize=10)
    _finish(fig, footer, lines)
    return _save(fig, path)


def stages_plot(bars, path=None, title=None):
    """Each group's stages (bench_stages.load_stages), one row each, labelled
    with the value and the speedup over the group's first stage; returns the
    Figure (which a notebook displays)."""
    if not bars:
        raise ValueError("bars: expected at least one stage, got none")
    groups = list(dict.fromkeys(b["group"] for b in bars))
    most = max(sum(b["group"] == g for b in bars) for g in groups)
    width = 6.4 if len(groups) == 1 else 5.6
    slower = any(b["value"] > next(c for c in bars if c["group"] == b["group"])["value"]
                 for b in bars)
    lines = _wrapped([("a speedup below 1x (red) is a slowdown: that stage took longer than "
                       "the first", _WARN)] if slower else [], width * min(len(groups), 2))
    fig, axes, footer = _grid(len(groups), width, 0.42 * most + 1.5, len(lines))
    for ax, group in zip(axes, groups):
        mine = [b for b in bars if b["group"] == group]
        values = [b["value"] for b in mine]
        unit = mine[0]["unit"]
        ends = _value_rows(ax, values, ["#55a868"] * len(mine), [False] * len(mine),
                           "seconds per epoch" if unit == "s per epoch" else unit,
                           unit.split()[0])
        _label_rows(ax, ends, [[(_seconds(v, unit.split()[0]), "black"),
                                _speedup_text(values[0] / v, i == 0)]
                               for i, v in enumerate(values)])
        ax.set_yticklabels([b["label"] for b in mine], fontsize=8)
        ax.set_title(group, fontsize=9)
    fig.suptitle(title or "Speedup after each stage, over the first", fontsize=10)
    _finish(fig, footer, lines)
    return _save(fig, path)


def main(argv=None):
    """python -m cnncuda.bench.plot RUN.json OUT.png: the speedup plot of a saved run."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m cnncuda.bench.plot RUN.json OUT.png", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        saved = json.load(f)
    rows = saved["rows"] if isinstance(saved, dict) else saved
    speedup_plot(rows, argv[1], environment=saved.get("environment") if isinstance(saved, dict)
                 else None)
    print("wrote %s" % argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Plots of bench rows (matplotlib, an optional dependency:
``pip install "cnncuda[bench]"``).

- ``speedup_plot``: bars of seconds per epoch per engine, log scale, each
  labelled with its speedup over the sequential ``cpu`` engine; one panel per
  model, batch size and data set; published figures can be drawn beside them
  (grey, hatched, labelled with their seconds only: another machine).
- ``curves_plot``: training loss, training and validation accuracy per epoch.
- ``stages_plot``: bars per optimisation stage (bench_stages), labelled with
  the speedup over each group's first bar.

Figures are made without pyplot (no display needed); a notebook shows the
returned Figure. ``python -m cnncuda.bench_plot rows.json out.png`` redraws
a saved run.
"""
import json
import math
import sys

from .bench_table import _rate, data_label, group_key

__all__ = ["speedup_plot", "curves_plot", "stages_plot", "main"]

_COLORS = {"host": "#4c72b0", "gpu": "#55a868", "torch": "#dd8452", "jax": "#8172b3"}
_FAMILIES = {"host": "cnncuda, CPU", "gpu": "cnncuda, GPU", "torch": "PyTorch", "jax": "JAX"}


def _figure(width, height):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("plots need matplotlib: pip install matplotlib (or "
                          "pip install \"cnncuda[bench]\")") from None
    fig = Figure(figsize=(width, height), dpi=110)
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


def _log_axis(ax, values):
    """A log y axis over `values` with room above the bars for their labels,
    ticks written as plain numbers."""
    from matplotlib.ticker import FuncFormatter
    ax.set_yscale("log")
    ax.set_ylim(min(values) / 2.5, max(values) * 4)
    plain = FuncFormatter(lambda v, _: "%g" % v)
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))


def _save(fig, path):
    if path:
        fig.savefig(path, bbox_inches="tight")
    return fig


def _grid(count, panel_width, panel_height):
    cols = min(count, 2)
    rows = math.ceil(count / cols)
    fig = _figure(panel_width * cols, panel_height * rows + 0.8)
    return fig, [fig.add_subplot(rows, cols, i + 1) for i in range(count)]


def _legend(ax, families, published):
    from matplotlib.patches import Patch
    handles = [Patch(facecolor=_COLORS[f], edgecolor="black", label=_FAMILIES[f])
               for f in dict.fromkeys(families)]
    if published:
        handles.append(Patch(facecolor="#bbbbbb", hatch="//", edgecolor="black",
                             label="published (another machine)"))
    if len(handles) > 1:
        ax.legend(handles=handles, fontsize=7, loc="upper right")


def speedup_plot(rows, path=None, environment=None, references=(), title=None):
    """Bars of seconds per epoch per engine (log scale) labelled with the
    speedup over the cpu row of the same panel; saved as PNG to `path` when
    given; returns the Figure. references: dicts {"label", "seconds_per_epoch",
    optional "model"} of published figures, drawn hatched in grey."""
    rows = [r for r in rows if r.get("seconds_per_epoch")]
    if not rows:
        raise ValueError("rows: expected at least one bench row with seconds_per_epoch, got none")
    groups = list(dict.fromkeys(group_key(r) for r in rows))
    width = max(4.5, 0.75 * max(sum(group_key(r) == g for r in rows) for g in groups)
                + 0.6 * len(references) + 1.5)
    fig, axes = _grid(len(groups), width, 4.2)
    for ax, key in zip(axes, groups):
        mine = [r for r in rows if group_key(r) == key]
        base = next((r for r in mine if r["device"] == "cpu"), None)
        refs = [ref for ref in references if ref.get("model") in (None, key[0])]
        labels = [r["device"] for r in mine] + [ref["label"] for ref in refs]
        values = [r["seconds_per_epoch"] for r in mine] + [ref["seconds_per_epoch"] for ref in refs]
        colors = [_COLORS[_family(r)] for r in mine] + ["#bbbbbb"] * len(refs)
        bars = ax.bar(range(len(values)), values, color=colors, edgecolor="black", linewidth=0.5)
        for bar in bars[len(mine):]:
            bar.set_hatch("//")
        _log_axis(ax, values)
        for i, (bar, value) in enumerate(zip(bars, values)):
            if i < len(mine) and base is not None:
                text = "%.2fx\n%.3g s" % (_rate(mine[i]) / _rate(base), value)
            else:
                text = "%.3g s" % value
            ax.text(bar.get_x() + bar.get_width() / 2, value * 1.12, text, ha="center",
                    va="bottom", fontsize=8)
        ax.set_xticks(range(len(values)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("seconds per epoch (log scale)")
        r0 = mine[0]
        ax.set_title("%s, batch %d, %s images (%s)" % (key[0], key[1],
                                                      format(max(r["images"] for r in mine), ","),
                                                      data_label(r0)), fontsize=9)
        if base is None:
            ax.text(0.5, 0.96, "no cpu row: no speedups", transform=ax.transAxes, ha="center",
                    va="top", fontsize=8, color="#aa0000")
        _legend(ax, [_family(r) for r in mine], bool(refs))
    heading = title or "Seconds per epoch; labels: speedup over the sequential cpu engine"
    machine = _machine_line(environment)
    fig.suptitle(heading + ("\n" + machine if machine else ""), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def curves_plot(rows, path=None, title=None):
    """Training loss, and training (solid) and validation (dashed) accuracy
    per epoch, one line per row; returns the Figure."""
    rows = [r for r in rows if r.get("history")]
    if not rows:
        raise ValueError("rows: expected bench rows with a history, got none")
    fig = _figure(10, 4)
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
    r0 = rows[0]
    fig.suptitle(title or "%s, %s" % (r0["model"], data_label(r0)), fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def stages_plot(bars, path=None, title=None):
    """Bars of bench_stages.load_stages (log scale), each labelled with the
    speedup over its group's first bar; returns the Figure."""
    if not bars:
        raise ValueError("bars: expected at least one stage, got none")
    groups = list(dict.fromkeys(b["group"] for b in bars))
    most = max(sum(b["group"] == g for b in bars) for g in groups)
    fig, axes = _grid(len(groups), max(4.5, 1.1 * most + 1.5), 4.4)
    for ax, group in zip(axes, groups):
        mine = [b for b in bars if b["group"] == group]
        values = [b["value"] for b in mine]
        drawn = ax.bar(range(len(mine)), values, color="#55a868", edgecolor="black",
                       linewidth=0.5)
        _log_axis(ax, values)
        for bar, value in zip(drawn, values):
            ax.text(bar.get_x() + bar.get_width() / 2, value * 1.12,
                    "%.2fx\n%.3g" % (values[0] / value, value), ha="center", va="bottom",
                    fontsize=8)
        ax.set_xticks(range(len(mine)))
        ax.set_xticklabels([b["label"] for b in mine], rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("%s (log scale)" % mine[0]["unit"])
        ax.set_title(group, fontsize=9)
    fig.suptitle(title or "Speedup after each stage, over the first", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def main(argv=None):
    """python -m cnncuda.bench_plot RUN.json OUT.png: the speedup plot of a saved run."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m cnncuda.bench_plot RUN.json OUT.png", file=sys.stderr)
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

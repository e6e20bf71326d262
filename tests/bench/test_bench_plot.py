"""The bench's plots (speedup bars, training curves, optimisation stages) and
the stages they read: the kernel harness's JSON or BENCHMARKS.md's history."""
import json
import os

import pytest

from cnncuda import bench
from cnncuda.bench import plot as bench_plot
from cnncuda.bench.table import add_speedups
from cnncuda.bench.stages import (find_repository_file, load_stages, read_stages_json,
                                  recorded_engine_stages)

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def rows():
    return bench.run(models=["tiny_mnist", "lenet5"], engines=["cpu", "numpy"], images=48,
                     epochs=2, data="synthetic", val_images=16, frameworks="none", verbose=0,
                     log=lambda line: None)


def texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def notes(fig):
    """The notes under the panels (the suptitle left out), lines joined."""
    return " ".join(t.get_text().strip() for t in fig.texts if t is not fig._suptitle)


def fake_row(device, seconds, model="lenet5", data="synthetic", images=60000):
    return {"model": model, "device": device, "batch_size": 32, "images": images,
            "data": data, "dataset": "mnist" if data == "real" else "synthetic",
            "data_note": "MNIST is not on this machine" if data == "synthetic" else "",
            "seconds_per_epoch": seconds, "images_per_second": images / seconds}


def tick_texts(axis):
    fig = axis.axes.figure
    fig.canvas.draw()
    return [t.get_text() for t in axis.get_ticklabels() if t.get_text()]


def test_speedup_plot(rows, tmp_path):
    env = {"gpus": ["Some GPU"], "cpu": "Some CPU", "cores": 8, "date": "2026-11-21T10:00:00"}
    refs = [{"label": "Keras, CPU (published)", "seconds_per_epoch": 84.0, "model": "lenet5"}]
    fig = bench_plot.speedup_plot(rows, str(tmp_path / "s.png"), environment=env, references=refs)
    assert (tmp_path / "s.png").read_bytes()[:8] == PNG
    assert len(fig.axes) == 2                      # one panel per model
    tiny, lenet = fig.axes
    assert [t.get_text() for t in tiny.get_yticklabels()] == ["cpu", "numpy"]
    assert [t.get_text() for t in lenet.get_yticklabels()] == ["cpu", "numpy",
                                                              "Keras, CPU (published)"]
    numpy_row = rows[1]
    labels = texts(fig)
    assert labels[:2] == ["%.3g s" % rows[0]["seconds_per_epoch"], "  baseline (1x)"]
    assert labels[2] == "%.3g s" % numpy_row["seconds_per_epoch"]
    speedup = numpy_row["speedup_vs_cpu"]
    assert labels[3] == ("  %.2fx: slower" % speedup if speedup < 1 else "  %.2fx faster" % speedup)
    assert "84 s" in labels                         # a published row: seconds, no speedup
    assert tiny.get_title() == "tiny_mnist, batch 32, 48 images, SYNTHETIC data"
    assert "GPU: Some GPU | CPU: Some CPU (8 cores) | 2026-11-21" in fig._suptitle.get_text()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "synthetic data: images" in notes(fig) and "published (another machine)" in legend


def test_speedup_plot_without_a_cpu_row_says_so(rows):
    fig = bench_plot.speedup_plot([r for r in rows if r["device"] != "cpu"])
    assert "no cpu row: no speedups" in texts(fig)
    with pytest.raises(ValueError, match="rows: expected at least one bench row"):
        bench_plot.speedup_plot([])


def test_close_times_are_bars_in_their_ratio_with_ticks_in_seconds():
    fig = bench_plot.speedup_plot(add_speedups([fake_row("cpu", 21.3), fake_row("omp:2", 12.0)]))
    ax = fig.axes[0]
    assert ax.get_xscale() == "linear" and ax.get_xlim()[0] == 0
    assert [bar.get_width() for bar in ax.patches] == [21.3, 12.0]   # lengths: the seconds
    ticks = tick_texts(ax.xaxis)
    assert len(ticks) >= 4 and all(t.endswith(" s") for t in ticks), ticks
    assert "bar lengths in the ratio of the times" in ax.get_xlabel()
    assert texts(fig)[2:] == ["12 s", "  1.78x faster"]


def test_times_far_apart_are_dots_on_a_log_axis_with_ticks_in_seconds():
    fig = bench_plot.speedup_plot(add_speedups([fake_row("cpu", 88.0), fake_row("cuda", 0.55)]))
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and not ax.patches         # no bar lengths to misread
    assert len(ax.collections) == 2
    ticks = tick_texts(ax.xaxis)
    assert {"1 s", "10 s"} <= set(ticks) and all(t.endswith(" s") for t in ticks), ticks
    assert "log axis: equal distances are equal ratios" in ax.get_xlabel()
    assert "  160x faster" in texts(fig)


def test_a_slowdown_and_more_threads_than_cores_are_marked():
    rows = add_speedups([fake_row("cpu", 21.3), fake_row("omp:2", 31.0),
                         fake_row("omp:4", 48.5)])
    fig = bench_plot.speedup_plot(rows, environment={"cpu": "x", "cores": 2})
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["cpu", "omp:2", "omp:4 *"]
    assert ax.get_yticklabels()[2].get_color() == bench_plot._WARN
    slow = [t for t in ax.texts if t.get_text() == "  0.69x: slower"]
    assert slow and slow[0].get_color() == bench_plot._WARN
    assert "a speedup below 1x (red) is a slowdown" in notes(fig)
    assert "* omp:4: more threads than the 2 cores of the machine that ran it" in notes(fig)
    fast = bench_plot.speedup_plot(add_speedups([fake_row("cpu", 21.3), fake_row("omp:2", 12.0)]),
                                   environment={"cpu": "x", "cores": 2})
    assert "slowdown" not in notes(fast) and "more threads" not in notes(fast)


def test_without_an_environment_this_machines_cores_count(monkeypatch):
    import cnncuda
    monkeypatch.setattr(cnncuda.runtime, "_cores", lambda: 4)
    rows = add_speedups([fake_row("cpu", 20.0, data="real"), fake_row("omp:4", 6.0, data="real"),
                         fake_row("omp:8", 5.0, data="real")])
    fig = bench_plot.speedup_plot(rows)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["cpu", "omp:4", "omp:8 *"]
    assert notes(fig).startswith("* omp:8: more threads than the 4 cores")
    assert "synthetic" not in notes(fig) and "real data: mnist" in fig.axes[0].get_title()


def test_a_figure_shows_itself_in_a_notebook(rows):
    fig = bench_plot.speedup_plot(rows)
    assert fig._repr_png_()[:8] == PNG
    formatters = pytest.importorskip("IPython.core.formatters")
    assert formatters.PNGFormatter()(fig)[:8] == PNG   # what Jupyter and Colab display


def test_curves_plot(rows, tmp_path):
    fig = bench_plot.curves_plot(rows[:2], str(tmp_path / "c.png"))
    assert (tmp_path / "c.png").read_bytes()[:8] == PNG
    loss_ax, acc_ax = fig.axes
    assert len(loss_ax.lines) == 2 and len(acc_ax.lines) == 4    # train and validation
    assert list(loss_ax.lines[0].get_xdata()) == [1, 2]


def test_replot_a_saved_run(rows, tmp_path, capsys):
    saved = tmp_path / "run.json"
    bench.write_json(str(saved), rows, {"cpu": "x", "cores": 2, "date": "2026-01-01"}, "cmd")
    assert bench_plot.main([str(saved), str(tmp_path / "again.png")]) == 0
    assert (tmp_path / "again.png").read_bytes()[:8] == PNG
    assert bench_plot.main([str(saved)]) == 2


def test_recorded_engine_stages_are_read_from_benchmarks_md():
    path = find_repository_file("BENCHMARKS.md")
    assert path is not None
    stages = recorded_engine_stages(path)
    at32 = [(s["stage"], s["seconds"]) for s in stages if s["batch"] == 32]
    at512 = [(s["stage"], s["seconds"]) for s in stages if s["batch"] == 512]
    assert at32 == [(1, 5.902), (2, 0.830), (3, 0.756), (4, 0.548)]
    assert at512 == [(1, 7.574), (2, 0.395), (4, 0.251)]  # stage 3 has no batch-512 figure
    assert stages[0]["name"].startswith("first correct version")


def test_without_the_json_the_recorded_stages_are_loaded(monkeypatch):
    from cnncuda.bench import stages as bench_stages
    monkeypatch.setattr(bench_stages, "STAGES_JSON", os.path.join("dev", "cuda", "absent.json"))
    monkeypatch.setattr(bench_stages, "MEASURED_STAGES_JSON", os.path.join("docs", "absent.json"))
    what, bars, source, notes = load_stages()
    assert what == "engine stages" and source == find_repository_file("BENCHMARKS.md")
    assert notes == ["measured on an H200 (BENCHMARKS.md)"]
    assert [b["value"] for b in bars if b["group"].endswith("batch 32")] == \
        [5.902, 0.830, 0.756, 0.548]
    assert bars[0]["label"] == "1. first correct version" and bars[0]["unit"] == "s per epoch"


def test_recorded_stages_need_the_table(tmp_path):
    doc = tmp_path / "B.md"
    doc.write_text("# Benchmarks\n\nnothing staged here\n")
    with pytest.raises(ValueError, match="no table of stages"):
        recorded_engine_stages(str(doc))


def test_stages_json_is_checked(tmp_path):
    path = tmp_path / "stages.json"
    for entries, message in (
            ([], "expected a non-empty list"),
            ([{"op": "sgemm", "version": 1, "name": "naive"}], r"\[0\]: missing key 'ms'"),
            ([{"op": "sgemm", "version": 1, "name": "naive", "ms": "4"}],
             r"\[0\]\.ms: expected a number or null, got '4'"),
            ([{"op": "sgemm", "version": 1.5, "name": "naive", "ms": 4}],
             r"\[0\]\.version: expected an int or a string"),
            ([{"op": "sgemm", "version": True, "name": "naive", "ms": 4}],
             r"\[0\]\.version: expected an int or a string, got True"),
            ([{"op": "sgemm", "version": 1, "name": "naive", "ms": 4, "ok": "yes"}],
             r"\[0\]\.ok: expected true or false"),
            ([{"op": "sgemm", "version": 1, "name": "naive", "ms": 0}],
             r"\[0\]\.ms: expected a number > 0 or null, got 0")):
        path.write_text(json.dumps(entries))
        with pytest.raises(ValueError, match=message):
            read_stages_json(str(path))
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        read_stages_json(str(path))


def harness_rows(op, version, name, per_shape, total, ok=True):
    """Rows as dev/cuda/run_all.sh writes them: one per seed shape, one total."""
    device = "GPU X (sm_90, 132 SMs)"
    rows = [{"op": op, "version": version, "name": name, "shape": shape, "ms": ms,
             "max_err": 1e-7, "ok": ok, "device": device} for shape, ms in per_shape.items()]
    rows.append({"op": op, "version": version, "name": name, "shape": "total", "ms": total,
                 "max_err": 1e-7, "ok": ok, "device": device})
    return rows


def test_load_stages_prefers_the_harness_json_and_its_totals(tmp_path):
    path = tmp_path / "stages.json"
    entries = (harness_rows("sgemm", 2, "shared-memory tiles: 32x32", {"a": 0.2, "b": 0.3}, 0.5)
               + harness_rows("sgemm", 1, "naive: one thread per output", {"a": 1.0, "b": 3.0},
                              4.0)
               + harness_rows("sgemm", 3, "register blocking", {"a": 0.1, "b": 0.1}, None,
                              ok=False)
               + [{"op": "pool", "version": 1, "name": "naive", "shape": "s1", "ms": 0.2},
                  {"op": "pool", "version": 2, "name": "engine", "shape": "s1", "ms": 0.1}])
    path.write_text(json.dumps(entries))
    what, bars, source, notes = load_stages(str(path))
    assert what == "kernel versions" and source == str(path)
    assert [(b["group"], b["label"], b["value"]) for b in bars] == [
        ("sgemm (total over the seed shapes)", "v1 naive", 4.0),
        ("sgemm (total over the seed shapes)", "v2 shared-memory tiles", 0.5),
        ("pool: s1", "v1 naive", 0.2), ("pool: s1", "v2 engine", 0.1)]
    assert notes == ["measured on GPU X (sm_90, 132 SMs)",
                     "sgemm (total over the seed shapes) v3 register blocking: left out (no time)"]
    fig = bench_plot.stages_plot(bars, str(tmp_path / "k.png"))
    assert texts(fig)[2:4] == ["0.5 ms", "  8.00x faster"]
    assert (tmp_path / "k.png").read_bytes()[:8] == PNG
    with pytest.raises(ValueError, match="stages_json: expected a file"):
        load_stages(str(tmp_path / "absent.json"))
    path.write_text(json.dumps(harness_rows("sgemm", 1, "naive", {"a": 1.0}, None, ok=False)))
    with pytest.raises(ValueError, match="no version has a time"):
        load_stages(str(path))


def test_without_a_local_run_the_committed_h200_measurement_is_loaded(monkeypatch):
    from cnncuda.bench import stages as bench_stages
    monkeypatch.setattr(bench_stages, "STAGES_JSON", os.path.join("dev", "cuda", "absent.json"))
    what, bars, source, notes = load_stages()
    assert what == "kernel versions" and source.endswith(os.path.join("figures", "stages_h200.json"))
    assert any("H200" in n for n in notes)
    sgemm = [b for b in bars if b["group"].startswith("sgemm")]
    assert len(sgemm) == 5 and sgemm[-1]["value"] < sgemm[0]["value"]

"""The bench's plots (speedup bars, training curves, optimisation stages) and
the stages they read: the kernel harness's JSON or BENCHMARKS.md's history."""
import json
import os

import pytest

from cnncuda import bench, bench_plot
from cnncuda.bench_stages import (find_repository_file, load_stages, read_stages_json,
                                  recorded_engine_stages)

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def rows():
    return bench.run(models=["tiny_mnist", "lenet5"], engines=["cpu", "numpy"], images=48,
                     epochs=2, data="synthetic", val_images=16, frameworks="none", verbose=0,
                     log=lambda line: None)


def texts(fig):
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def test_speedup_plot(rows, tmp_path):
    env = {"gpus": ["Some GPU"], "cpu": "Some CPU", "cores": 8, "date": "2026-11-21T10:00:00"}
    refs = [{"label": "Keras, CPU (published)", "seconds_per_epoch": 84.0, "model": "lenet5"}]
    fig = bench_plot.speedup_plot(rows, str(tmp_path / "s.png"), environment=env, references=refs)
    assert (tmp_path / "s.png").read_bytes()[:8] == PNG
    assert len(fig.axes) == 2                      # one panel per model
    tiny, lenet = fig.axes
    assert tiny.get_yscale() == "log"
    assert [t.get_text() for t in tiny.get_xticklabels()] == ["cpu", "numpy"]
    assert [t.get_text() for t in lenet.get_xticklabels()] == ["cpu", "numpy",
                                                              "Keras, CPU (published)"]
    numpy_row = rows[1]
    labels = texts(fig)
    assert labels[0].startswith("1.00x\n")
    assert labels[1].startswith("%.2fx\n" % numpy_row["speedup_vs_cpu"])
    assert "84 s" in labels                         # a published bar: seconds, no speedup
    assert "tiny_mnist, batch 32, 48 images (synthetic)" == tiny.get_title()
    assert "GPU: Some GPU | CPU: Some CPU (8 cores) | 2026-11-21" in fig._suptitle.get_text()


def test_speedup_plot_without_a_cpu_row_says_so(rows):
    fig = bench_plot.speedup_plot([r for r in rows if r["device"] != "cpu"])
    assert "no cpu row: no speedups" in texts(fig)
    with pytest.raises(ValueError, match="rows: expected at least one bench row"):
        bench_plot.speedup_plot([])


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
    from cnncuda import bench_stages
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
    assert "8.00x\n0.5" in texts(fig) and (tmp_path / "k.png").read_bytes()[:8] == PNG
    with pytest.raises(ValueError, match="stages_json: expected a file"):
        load_stages(str(tmp_path / "absent.json"))
    path.write_text(json.dumps(harness_rows("sgemm", 1, "naive", {"a": 1.0}, None, ok=False)))
    with pytest.raises(ValueError, match="no version has a time"):
        load_stages(str(path))


def test_without_a_local_run_the_committed_h200_measurement_is_loaded(monkeypatch):
    from cnncuda import bench_stages
    monkeypatch.setattr(bench_stages, "STAGES_JSON", os.path.join("dev", "cuda", "absent.json"))
    what, bars, source, notes = load_stages()
    assert what == "kernel versions" and source.endswith(os.path.join("figures", "stages_h200.json"))
    assert any("H200" in n for n in notes)
    sgemm = [b for b in bars if b["group"].startswith("sgemm")]
    assert len(sgemm) == 5 and sgemm[-1]["value"] < sgemm[0]["value"]

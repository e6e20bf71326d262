"""The streaming bench (python -m cnncuda.bench.stream), run tiny on the cpu
engine: the JPEG folder, the three rows, their consistency, the table and
the JSON. Its GPU figures come from the GPU machine (BENCHMARKS.md)."""
import json
import os

import numpy as np
import pytest

from cnncuda.bench import stream as bench_stream

pytest.importorskip("PIL")


def test_the_images_are_imagenette_sized_jpegs(tmp_path):
    from PIL import Image
    bench_stream.write_images(str(tmp_path), 12, seed=1)
    folders = sorted(os.listdir(tmp_path))
    assert folders == ["class_%d" % k for k in range(10)]
    files = [os.path.join(tmp_path, f, name) for f in folders
             for name in os.listdir(tmp_path / f)]
    assert len(files) == 12
    with Image.open(files[0]) as image:
        assert image.format == "JPEG" and image.size == (213, 160) and image.mode == "RGB"
        pixels = np.asarray(image).reshape(-1, 3)
    assert len(np.unique(pixels, axis=0)) > 1000          # a picture, not a flat colour


def test_a_tiny_run_on_cpu(tmp_path, capsys, monkeypatch):
    import tempfile
    (tmp_path / "temp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "temp"))
    out = tmp_path / "stream.json"
    result = bench_stream.main(["--images", "16", "--batch-size", "8", "--engine", "cpu",
                                "--json", str(out)])
    rows = result["rows"]
    assert [r["row"] for r in rows] == ["pipeline", "fit, overlap", "fit, no overlap"]
    assert result["engine"] == "cpu" and result["batch_size"] == 8 and result["images"] == 16
    for r in rows:
        assert r["images"] == 16 and r["seconds"] > 0
        assert r["images_per_second"] == pytest.approx(r["images"] / r["seconds"])
    for r in rows[1:]:
        assert 0 < r["upload_seconds"] <= r["engine_seconds"] <= r["seconds"]
        assert 0 <= r["wait_seconds"] <= r["seconds"]
        assert r["busy_share"] == pytest.approx(r["engine_seconds"] / r["seconds"])
        assert r["busy_share"] + r["idle_share"] == pytest.approx(1.0)
        assert r["blocks"] >= 1 and r["loss"] > 0
    assert result["overlap_speedup"] == pytest.approx(
        rows[1]["images_per_second"] / rows[2]["images_per_second"])
    text = capsys.readouterr().out
    assert "imagenette_cnn on cpu, batch 8, 16 JPEGs" in text
    assert "fit, no overlap" in text and "overlap: " in text
    saved = json.loads(out.read_text())
    assert saved["rows"] == json.loads(json.dumps(rows)) and "command" in saved
    assert os.listdir(tmp_path / "temp") == []       # its temporary folder removed


def test_an_engine_that_does_not_run_here_is_refused():
    with pytest.raises(ValueError, match="engine: expected an engine that runs here, got 'x'"):
        bench_stream.run(images=4, engine="x")

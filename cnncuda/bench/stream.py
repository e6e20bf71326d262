"""``python -m cnncuda.bench.stream``: fit over a folder of JPEG images,
decoding overlapped with the engine's steps, against the pipeline alone.

Writes --images JPEGs of Imagenette's size (the 160 px variant: 213x160,
10 class folders; smooth random colour fields with noise, so that they
decode as photos do, not as flat colour) into a temporary folder, reads it
with ``image_dataset_from_directory(image_size=(160, 160),
label_mode="categorical")`` and trains the seed ``imagenette_cnn`` on it
(cnncuda.seeds; Adam) with the given engine and batch size. Rows:

  pipeline       the dataset iterated alone, no model: images per second
                 of decoding, resizing and batching
  fit, overlap   fit over the dataset, the stream read on a producer thread
                 while the engine trains (cnncuda/data/feed.py)
  fit, no overlap  the same fit, the stream read between the engine calls

For the fits: images per second (wall time of fit), the engine's busy share
(seconds inside the engine calls on the training blocks -- the upload, the
steps, the sums read back, which wait for the GPU -- over the wall time;
an upper bound of the GPU's busy time on a GPU engine, so 1 - busy, the
idle share shown, is a lower bound of the GPU's idle time), the upload's
share of the wall time
(set_data), and the time fit's thread waited for the next block. Each fit
runs after an untimed warm-up fit on two batches (the network built, the
kernels chosen). The fits start from the same weights.

    python -m cnncuda.bench.stream --images 4096 --batch-size 32 --engine cuda
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import _C
from ..checks import positive_int
from ..data import feed
from ..data.image_folder import image_dataset_from_directory
from .script import keras_model

__all__ = ["write_images", "run", "format_table", "main"]

MODEL = "imagenette_cnn"
IMAGE_SIZE = (160, 160)      # what the model takes (height, width)
FILE_SIZE = (213, 160)       # an Imagenette-160 file: the short side 160 (width, height)
CLASSES = 10


def default_engine():
    """cuda where it runs, else cpu."""
    return "cuda" if _C.engine_status("cuda") is None else "cpu"


def _image(rng, label):
    """One (160, 213, 3) uint8 picture: a smooth colour field, a class tint, noise."""
    width, height = FILE_SIZE
    coarse = rng.random((5, 7, 3))
    rows = np.linspace(0, 4, height)
    cols = np.linspace(0, 6, width)
    r0, c0 = np.minimum(rows.astype(int), 3), np.minimum(cols.astype(int), 5)
    fr, fc = (rows - r0)[:, None, None], (cols - c0)[None, :, None]
    field = (coarse[r0][:, c0] * (1 - fr) * (1 - fc) + coarse[r0 + 1][:, c0] * fr * (1 - fc)
             + coarse[r0][:, c0 + 1] * (1 - fr) * fc + coarse[r0 + 1][:, c0 + 1] * fr * fc)
    tint = np.array([np.cos(label), np.sin(label), np.cos(2 * label)]) * 0.15
    picture = 255 * np.clip(field * 0.8 + tint + 0.1, 0, 1) + rng.normal(0, 8, field.shape)
    return np.clip(picture, 0, 255).astype(np.uint8)


def write_images(folder, images, seed=0, threads=None):
    """`images` JPEGs in folder/class_k/ (k < 10, in turn); returns the folder."""
    from PIL import Image
    images = positive_int(images, "images")
    for k in range(CLASSES):
        os.makedirs(os.path.join(folder, "class_%d" % k), exist_ok=True)

    def write(i):
        rng = np.random.default_rng((seed, i))
        label = i % CLASSES
        path = os.path.join(folder, "class_%d" % label, "image_%06d.jpg" % i)
        Image.fromarray(_image(rng, label)).save(path, quality=90)
    with ThreadPoolExecutor(threads or min(16, os.cpu_count() or 1)) as pool:
        list(pool.map(write, range(images)))
    return folder


def _dataset(folder, batch_size, seed):
    return image_dataset_from_directory(folder, label_mode="categorical", image_size=IMAGE_SIZE,
                                        batch_size=batch_size, shuffle=True, seed=seed,
                                        verbose=False)


def pipeline_row(folder, batch_size, seed=0):
    """The dataset iterated alone."""
    ds = _dataset(folder, batch_size, seed)
    began = time.perf_counter()
    images = sum(len(x) for x, _ in ds)
    seconds = time.perf_counter() - began
    return {"row": "pipeline", "images": images, "seconds": seconds,
            "images_per_second": images / seconds}


def fit_row(folder, batch_size, engine, overlap, weights=None, seed=0):
    """One epoch of fit over the dataset (after a warm-up on two batches)."""
    model = keras_model(MODEL, engine, seed=seed)
    ds = _dataset(folder, batch_size, seed)
    model.build()
    if weights is not None:
        model.set_weights(weights)
    feed.fit(model, ds.take(2), 1, 0, [], None, True, 0, None, None, None, 1, overlap=overlap)
    if weights is not None:
        model.set_weights(weights)         # each timed fit starts from the same weights
    stats = feed.FeedStats()
    began = time.perf_counter()
    history = feed.fit(model, ds, 1, 0, [], None, True, 0, None, None, None, 1,
                       overlap=overlap, stats=stats)
    seconds = time.perf_counter() - began
    return {"row": "fit, overlap" if overlap else "fit, no overlap", "images": stats.samples,
            "seconds": seconds, "images_per_second": stats.samples / seconds,
            "engine_seconds": stats.engine, "upload_seconds": stats.upload,
            "wait_seconds": stats.wait, "busy_share": min(1.0, stats.engine / seconds),
            "idle_share": max(0.0, 1.0 - stats.engine / seconds),
            "upload_share": stats.upload / seconds, "wait_share": stats.wait / seconds,
            "blocks": stats.blocks, "loss": float(history.history["loss"][-1])}


def run(images=4096, batch_size=32, engine=None, folder=None, seed=0, log=print):
    """The three rows (and the setting) as a dict; writes the images into
    `folder` (a new temporary one, removed afterwards, when None)."""
    images = positive_int(images, "images")
    batch_size = positive_int(batch_size, "batch_size")
    engine = engine or default_engine()
    status = None if engine == "numpy" else _C.engine_status(engine.split(":")[0])
    if status is not None:
        raise ValueError("engine: expected an engine that runs here, got %r (%s)"
                         % (engine, status))
    own = folder is None
    folder = tempfile.mkdtemp(prefix="cnncuda-stream-") if own else folder
    try:
        began = time.perf_counter()
        write_images(folder, images, seed=seed)
        log("wrote %d JPEGs of %dx%d in %.1f s" % (images, FILE_SIZE[0], FILE_SIZE[1],
                                                   time.perf_counter() - began))
        rows = [pipeline_row(folder, batch_size, seed)]
        log(_line(rows[-1]))
        weights = keras_model(MODEL, "cpu", seed=seed)
        weights.build()
        weights = weights.get_weights()
        for overlap in (True, False):
            rows.append(fit_row(folder, batch_size, engine, overlap, weights, seed))
            log(_line(rows[-1]))
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)
    result = {"model": MODEL, "engine": engine, "batch_size": batch_size, "images": images,
              "cores": os.cpu_count(), "rows": rows}
    if engine.startswith("cuda") or engine.startswith("cudnn"):
        result["gpus"] = list(_C.cuda_devices())
    result["overlap_speedup"] = rows[1]["images_per_second"] / rows[2]["images_per_second"]
    return result


def _line(row):
    text = "%-16s %6d images %8.2f s %9.1f images/s" % (
        row["row"], row["images"], row["seconds"], row["images_per_second"])
    if "busy_share" in row:
        text += "   engine busy %3.0f%% (upload %3.0f%%), idle >= %3.0f%%, waited %3.0f%%" % (
            100 * row["busy_share"], 100 * row["upload_share"], 100 * row["idle_share"],
            100 * row["wait_share"])
    return text


def format_table(result):
    """The rows as a table, with the setting and the overlap's gain."""
    head = ("%s on %s, batch %d, %d JPEGs of %dx%d -> %dx%d, %d cores%s"
            % (result["model"], result["engine"], result["batch_size"], result["images"],
               FILE_SIZE[0], FILE_SIZE[1], IMAGE_SIZE[1], IMAGE_SIZE[0], result["cores"],
               (", " + ", ".join(result["gpus"])) if result.get("gpus") else ""))
    titles = ("", "images", "seconds", "images/s", "busy", "upload", "idle", "waited")
    lines = [head, "", "%-16s %8s %9s %10s %8s %8s %9s %8s" % titles]
    for r in result["rows"]:
        shares = tuple("%.0f%%" % (100 * r[key]) if key in r else ""
                       for key in ("busy_share", "upload_share", "idle_share", "wait_share"))
        lines.append("%-16s %8d %9.2f %10.1f %8s %8s %9s %8s" % (
            (r["row"], r["images"], r["seconds"], r["images_per_second"]) + shares))
    lines += ["", "overlap: %.2fx the images per second of fit without it"
              % result["overlap_speedup"]]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m cnncuda.bench.stream",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=4096, help="JPEGs written and read (4096)")
    p.add_argument("--batch-size", type=int, default=32, help="batch size (32)")
    p.add_argument("--engine", default=None,
                   help="engine (default: cuda where a GPU is, else cpu)")
    p.add_argument("--folder", default=None,
                   help="write the images here (default: a temporary folder, removed after)")
    p.add_argument("--json", help="write the result here")
    a = p.parse_args(argv)
    try:
        result = run(a.images, a.batch_size, a.engine, a.folder)
    except ValueError as error:
        p.error(str(error))
    print()
    print(format_table(result))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(result, command=" ".join(sys.argv)), f, indent=1)
    return result


if __name__ == "__main__":
    main()

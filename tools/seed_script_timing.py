"""The seed CIFAR-10 script as a user runs it, timed where the time goes.

    python3 tools/seed_script_timing.py --device cuda --epochs 15 --json out.json

Runs experiment 1's script with only its imports changed (uint8 images
divided by 255.0, so float64; labels of shape (N, 1); ``model.fit(x, y,
epochs=E, validation_data=(x_test, y_test))`` with the bar on), on CIFAR-10
shaped data (the real set where ``cnncuda.datasets.cifar10`` finds it, else
seeded random uint8 images), and reports:

- the whole fit call, and its parts: the fixed cost before the first epoch
  begins (checks, conversion, upload), each epoch, each validation pass;
- one-epoch fit calls on float64, float32 and uint8 input: their fixed cost;
- ``evaluate`` and ``predict`` on the 10,000 test images (float64).

It uses only the public API, so the same file times an older tree (run it
with that tree's folder first on sys.path: ``--tree DIR``). For a bar drawn
in place, as in a terminal or Jupyter, run it under a pseudo-terminal
(tools/gpu_fit_speed.sh does).
"""
import argparse
import json
import os
import sys
import time


def load(tree):
    if tree:
        sys.path.insert(0, os.path.abspath(tree))
    import cnncuda
    from cnncuda.keras import callbacks, layers, models
    return cnncuda, callbacks, layers, models


def cifar_like(seed=0):
    import numpy as np
    try:
        from cnncuda.datasets import cifar10
        (x, y), (xt, yt) = cifar10.load_data()
        return x, y, xt, yt, "real: cifar10"
    except Exception:
        rng = np.random.default_rng(seed)
        x = rng.integers(0, 256, (50000, 32, 32, 3), dtype=np.uint8)
        xt = rng.integers(0, 256, (10000, 32, 32, 3), dtype=np.uint8)
        return (x, rng.integers(0, 10, (50000, 1)), xt, rng.integers(0, 10, (10000, 1)),
                "synthetic")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--tree", default=None, help="import cnncuda from this folder")
    ap.add_argument("--images", type=int, default=None,
                    help="the first N training and N/5 test images (a quick check)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    cnncuda, callbacks, layers, models = load(args.tree)
    import numpy as np

    train_images, train_labels, test_images, test_labels, data = cifar_like()
    if args.images:
        train_images, train_labels = train_images[:args.images], train_labels[:args.images]
        test_images, test_labels = test_images[:args.images // 5], test_labels[:args.images // 5]

    def seed_model():
        model = models.Sequential([
            layers.Conv2D(32, (3, 3), activation="relu", input_shape=(32, 32, 3)),
            layers.MaxPooling2D((2, 2)),
            layers.Conv2D(64, (3, 3), activation="relu"),
            layers.MaxPooling2D((2, 2)),
            layers.Conv2D(64, (3, 3), activation="relu"),
            layers.Flatten(),
            layers.Dense(64, activation="relu"),
            layers.Dense(10),
        ])
        model.compile(optimizer="adam",
                      loss=cnncuda.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"], device=args.device)
        return model

    class Clock(callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.epochs, self.tests = [], []

        def on_epoch_begin(self, epoch, logs=None):
            self.epochs.append(time.perf_counter())

        def on_test_begin(self, logs=None):
            self.test = time.perf_counter()

        def on_test_end(self, logs=None):
            self.tests.append(time.perf_counter() - self.test)

    out = {"device": args.device, "data": data, "epochs": args.epochs,
           "cnncuda": os.path.dirname(cnncuda.__file__)}
    # warm-up: the engine's first network (context, handles, kernels loaded)
    warm = seed_model()
    warm.fit(train_images[:640] / 255.0, train_labels[:640], epochs=1, verbose=0)
    del warm

    # the script, as written
    train_x, test_x = train_images / 255.0, test_images / 255.0
    model = seed_model()
    clock = Clock()
    began = time.perf_counter()
    history = model.fit(train_x, train_labels, epochs=args.epochs,
                        validation_data=(test_x, test_labels), callbacks=[clock])
    ended = time.perf_counter()
    marks = clock.epochs + [ended]
    out["fit_s"] = ended - began
    out["fixed_s"] = clock.epochs[0] - began
    out["epoch_s"] = [b - a for a, b in zip(marks, marks[1:])]
    out["val_s"] = clock.tests
    out["val_accuracy"] = history.history["val_accuracy"][-1]

    # one-epoch calls: the fixed cost per input type
    out["fixed_s_by_dtype"] = {}
    for name, x in (("float64", train_x), ("float32", train_x.astype(np.float32)),
                    ("uint8", train_images)):
        clock = Clock()
        began = time.perf_counter()
        model.fit(x, train_labels, epochs=1, verbose=0, callbacks=[clock])
        out["fixed_s_by_dtype"][name] = clock.epochs[0] - began
    for name, call in (("evaluate_s", lambda: model.evaluate(test_x, test_labels, verbose=0)),
                       ("predict_s", lambda: model.predict(test_x, verbose=0))):
        best = None
        for _ in range(3):
            began = time.perf_counter()
            call()
            took = time.perf_counter() - began
            best = took if best is None else min(best, took)
        out[name] = best
    text = json.dumps(out, indent=1)
    print("\nRESULT " + json.dumps(out))
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

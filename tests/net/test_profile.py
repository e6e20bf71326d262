"""The per-layer profile of a training step (csrc/net/profile.c,
cnncuda/profile.py): every planned step timed, in plan order, with the
update last; the parts add up to an ordinary step within a stated bound;
FLOPs from the shapes; the model left as it was; the bench's --profile."""
import json
import time

import numpy as np
import pytest

from cnncuda import keras
from cnncuda.engine import make_net
from cnncuda.profile import profile_network
from cnncuda.seeds import seed_network, synthetic_data
from conftest import engine_params

GPU = ("cuda", "cudnn")


def seed(name, engine, batch=32):
    s = seed_network(name)
    return make_net(engine, s["layers"], s["input_shape"], batch, s["loss"], s["optimizer"],
                    seed=3), s


@pytest.mark.parametrize("name", ["cifar10_cnn", "lenet5", "binary_100"])
@pytest.mark.parametrize("engine", engine_params())
def test_every_planned_step_is_timed_in_order(engine, name):
    net, s = seed(name, engine, batch=8)
    x, y = synthetic_data(name, 8, seed=1)
    rows = net.profile(x, y, steps=2)
    # a profiled step is train_batch's: its first convolution runs on its
    # input, where fit's (net.plan) reads the column matrix its gather wrote
    forward = [name.replace(".forward_col", ".forward") for name in net.plan()]
    assert [r[0] for r in rows] == forward + net.plan(backward=True) + ["optimizer"]
    assert all(seconds > 0 for _, seconds in rows)
    assert net.steps == 3                 # one untimed step and two timed: they train


@pytest.mark.parametrize("engine", engine_params(("cpu", "omp")))
def test_the_parts_add_up_to_a_step_on_the_host_engines(engine):
    """The parts of one profiled step (each step between two clock reads)
    against one train_batch right after it, in 41 pairs, the median of the
    pairs' ratios: 0.98-1.01 on the 2-core development machine, alone or with
    a busy loop or another omp process on the other core. (Pairs of longer
    runs, ten profiled steps' means against twenty steps' median, gave a
    median of 1.62 in CI, where a second test session shares the 2 cores
    and omp's steps took 4-12 ms instead of 1: the two sides met different
    loads.) The bounds, 0.85x-1.15x, put the largest part timed twice (1.19)
    or left out (0.77) outside them on a quiet machine."""
    net, s = seed("lenet5", engine)
    x, y = synthetic_data("lenet5", 32, seed=1)
    ratios = []
    for _ in range(41):
        parts = sum(seconds for _, seconds in net.profile(x, y, steps=1))
        began = time.perf_counter()
        net.train_batch(x, y)
        ratios.append(parts / (time.perf_counter() - began))
    assert 0.85 <= float(np.median(ratios)) <= 1.15, sorted(ratios)


@pytest.mark.parametrize("engine", engine_params(GPU))
def test_the_parts_against_a_recorded_step_on_the_gpu(engine):
    """On the GPU the parts are a step queued op by op with an event between
    any two, beside a step recorded as a CUDA graph: the parts may sum to
    more (launch gaps the graph removes), never to less than half of it."""
    model = _keras_cifar(engine)
    x, y = synthetic_data("cifar10_cnn", 64, seed=1)
    p = model.profile(x, y, batch_size=32, steps=10)
    assert p.step_kind == "recorded"
    assert 0.5 <= p.parts_seconds / p.step_seconds <= 4.0, str(p)


def _keras_cifar(device):
    m = keras.Sequential([
        keras.layers.Conv2D(32, 3, activation="relu", input_shape=(32, 32, 3)),
        keras.layers.MaxPooling2D(), keras.layers.Conv2D(64, 3, activation="relu"),
        keras.layers.MaxPooling2D(), keras.layers.Conv2D(64, 3, activation="relu"),
        keras.layers.Flatten(), keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10)], seed=1)
    m.compile(optimizer="adam", metrics=["accuracy"], device=device,
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def test_a_model_profile_names_its_layers_counts_flops_and_changes_nothing():
    model = _keras_cifar("cpu")
    x, y = synthetic_data("cifar10_cnn", 40, seed=1)
    model.fit(x, y, epochs=1, verbose=0)
    before, iterations = model.get_weights(), model.optimizer.iterations
    p = model.profile(x, y, batch_size=16, steps=2)
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    assert model.optimizer.iterations == iterations
    rows = {r["step"]: r for r in p.rows}
    # the second Conv2D (engine layer 3): 15x15x32 -> 13x13x64, 3x3 kernels, batch 16
    macs = 16 * 13 * 13 * 64 * 3 * 3 * 32
    assert rows["conv2d_3.forward+relu"]["flops"] == 2 * macs + 16 * 13 * 13 * 64
    assert rows["conv2d_3.backward_data"]["flops"] == 2 * macs
    conv, pool, flatten = model.layers[2].name, model.layers[1].name, model.layers[5].name
    assert rows["conv2d_3.forward+relu"]["layer"] == conv     # the second Conv2D
    assert rows["conv2d_3.backward_filter"]["part"] == "weight gradient"
    assert rows["optimizer"]["part"] == "update" and rows["optimizer"]["layer"] == "adam"
    assert p.parts_seconds == pytest.approx(sum(r["seconds"] for r in p.rows))
    assert set(p.by_layer()) == {l.name for l in model.layers if l.name != flatten} | {"adam"}
    text = str(p)
    assert "conv2d_3.backward_filter" in text and "Sum of the parts" in text
    # the second Conv2D's output and its ReLU's (its own buffer too) at batch 16
    out = 16 * 13 * 13 * 64 * 4
    assert p.layer_memory[conv][0] == 2 * out and p.layer_memory[conv][1] > 0
    assert p.layer_memory[flatten] == [0, 0]              # its input's buffer
    assert p.layer_memory[pool][0] == 2 * 16 * 15 * 15 * 32 * 4  # y and argmax


def test_arguments_are_checked():
    model = _keras_cifar("cpu")
    x, y = synthetic_data("cifar10_cnn", 8, seed=1)
    with pytest.raises(ValueError, match="x: expected at least batch_size \\(32\\) samples, got 8"):
        model.profile(x, y)
    with pytest.raises(ValueError, match="steps"):
        model.profile(x, y, batch_size=8, steps=0)
    plain = keras.Sequential([keras.layers.Dense(2, input_shape=(3,))])
    with pytest.raises(RuntimeError, match="compile your model before profiling"):
        plain.profile(np.zeros((4, 3)), np.zeros(4))
    net, _ = seed("tiny_mnist", "cpu", batch=4)
    xs, ys = synthetic_data("tiny_mnist", 4, seed=1)
    with pytest.raises(ValueError, match="steps: expected at least 1, got 0"):
        net.profile(xs, ys, steps=0)


def test_the_profile_plot_and_the_bench(tmp_path):
    pytest.importorskip("matplotlib")
    from cnncuda.bench import main
    x, y = synthetic_data("tiny_mnist", 16, seed=1)
    s = seed_network("tiny_mnist")
    p = profile_network("cpu", s["layers"], s["input_shape"], s["loss"], s["optimizer"], x, y,
                        16, 2)
    p.plot(path=str(tmp_path / "one.png"))
    assert (tmp_path / "one.png").stat().st_size > 1000
    main(["--model", "tiny_mnist", "--device", "cpu", "--profile", str(tmp_path / "p.png"),
          "--json", str(tmp_path / "p.json")])
    rows = json.loads((tmp_path / "p.json").read_text())
    assert rows[0]["model"] == "tiny_mnist" and rows[0]["device"] == "cpu"
    assert rows[0]["rows"][-1]["step"] == "optimizer"
    assert (tmp_path / "p.png").stat().st_size > 1000
    from cnncuda.profile import main as plot_rows          # the rows plotted elsewhere
    plot_rows([str(tmp_path / "p.json"), str(tmp_path / "again.png")])
    assert (tmp_path / "again.png").stat().st_size > 1000

"""The regression losses (mean squared error, mean absolute error, Huber,
mean squared logarithmic error, log-cosh, mean absolute percentage error):
every C engine against the NumPy reference (loss sum, accuracy count,
gradient; odd sizes, rows wider than a warp), the reference's gradient
against finite differences, and the values against Keras 3's loss
functions on the same arrays.

The loss is observed as in test_losses_and_optimizers.py: a bias-free Dense
layer fed the identity matrix outputs its kernel W, so the kernel's gradient
is the loss's gradient with respect to the network output.
"""
import json

import numpy as np
import pytest

from cnncuda import losses
from cnncuda import reference as ref
from cnncuda.engine import make_net
from conftest import ADAM, C_ENGINES, assert_close, run_keras

KINDS = list(ref.REGRESSION_LOSS_KINDS)


def predictions_and_targets(kind, n, k, rng):
    """Values on both sides of every kink and clip of `kind`, none exactly
    on one (the finite differences and the engines' float32 would part there)."""
    y = rng.standard_normal((n, k)) * 2.0
    t = rng.standard_normal((n, k)) * 2.0
    if kind == "mean_squared_logarithmic_error":
        y = np.abs(y) - 0.3           # some clipped at eps (no gradient)
        t = np.abs(t) - 0.3
    if kind == "mean_absolute_percentage_error":
        t.flat[::5] = 1e-9            # |t| under eps: divided by eps
    if kind == "huber":
        y.flat[::3] = t.flat[::3] + 0.3   # inside delta 0.7
    if k == 1:
        t = np.where(rng.random((n, k)) < 0.5, 0.0, 1.0)   # 0/1 targets: an accuracy to count
    return y.astype(np.float32), t.astype(np.float32)


def engine_loss(kind, delta=0.7):
    return {"kind": kind, "delta": delta} if kind == "huber" else {"kind": kind}


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n,k", [(1, 1), (7, 1), (5, 3), (3, 37), (130, 5)])
def test_regression_loss_value_gradient_and_accuracy(engine, kind, n, k):
    engine = "omp:2" if engine == "omp" else engine
    rng = np.random.default_rng(7 * n + k)
    y, t = predictions_and_targets(kind, n, k, rng)
    loss = engine_loss(kind)
    net = make_net(engine, [{"kind": "dense", "units": k, "use_bias": False}], (n,), n, loss, ADAM)
    net.set_weights([y])
    x = np.eye(n, dtype=np.float32)
    loss_sum, correct = net.compute_gradients(x, t)
    want_sum, want_correct, want_grad = ref.loss_forward_backward(
        kind, y.astype(np.float64), t.astype(np.float64), delta=np.float32(0.7))
    assert_close(loss_sum, want_sum, 1e-5, 1e-5 * n, "loss sum")
    assert correct == want_correct
    assert_close(net.get_gradients()[0], want_grad, 1e-5, 1e-6, "gradient")
    e_sum, e_correct = net.evaluate(x, t)
    assert_close(e_sum, want_sum, 1e-5, 1e-5 * n, "evaluate loss")
    assert e_correct == want_correct


def test_omp_equals_cpu_bit_for_bit():
    rng = np.random.default_rng(3)
    for kind in KINDS:
        y, t = predictions_and_targets(kind, 9, 6, rng)
        got = []
        for engine in ("cpu", "omp:2"):
            net = make_net(engine, [{"kind": "dense", "units": 6, "use_bias": False}], (9,), 9,
                           engine_loss(kind), ADAM)
            net.set_weights([y])
            got.append((net.compute_gradients(np.eye(9, dtype=np.float32), t),
                        net.get_gradients()[0]))
        assert got[0][0] == got[1][0], kind
        assert np.array_equal(got[0][1], got[1][1]), kind


def test_numpy_engine_is_the_reference():
    rng = np.random.default_rng(11)
    for kind in KINDS:
        y, t = predictions_and_targets(kind, 4, 3, rng)
        net = make_net("numpy", [{"kind": "dense", "units": 3, "use_bias": False}], (4,), 4,
                       engine_loss(kind), ADAM)
        net.set_weights([y])
        loss_sum, correct = net.compute_gradients(np.eye(4, dtype=np.float32), t)
        want = ref.loss_forward_backward(kind, y, t, delta=0.7)
        assert_close(loss_sum, want[0], 1e-6, 1e-6, kind)
        assert correct == want[1]
        assert_close(net.get_gradients()[0], want[2], 1e-6, 1e-7, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_reference_gradient_matches_finite_differences(kind):
    rng = np.random.default_rng(5)
    y, t = predictions_and_targets(kind, 4, 3, rng)
    y, t = y.astype(np.float64), t.astype(np.float64)
    if kind == "mean_squared_logarithmic_error":
        y = np.where(np.abs(y - 1e-7) < 1e-3, y + 0.01, y)    # off the clip
    _, _, grad = ref.regression_loss(kind, y, t, delta=0.7)
    n, k = y.shape
    h = 1e-6
    # elementwise (each term depends on its own y only; a batch sum would
    # drown a term's change in the others' rounding)
    up = ref._regression_terms(kind, y + h, t, 0.7)[0]
    down = ref._regression_terms(kind, y - h, t, 0.7)[0]
    num = (up - down) / (2 * h)
    # the gradient of the mean loss over the batch: d term / (n k)
    np.testing.assert_allclose(grad * (n * k), num, rtol=1e-6, atol=1e-6, err_msg=kind)
    # and the loss itself: the mean over k of the terms, summed over the rows
    loss_sum = ref.regression_loss(kind, y, t, grad=False, delta=0.7)[0]
    assert loss_sum == pytest.approx(ref._regression_terms(kind, y, t, 0.7)[0].mean(axis=1).sum())


@pytest.mark.keras3
def test_values_match_keras(tmp_path):
    rng = np.random.default_rng(2)
    cases = {}
    for kind in KINDS:
        for shape in ((6, 4), (5, 1), (3, 2, 5)):
            n, k = int(np.prod(shape[:-1])), shape[-1]
            y, t = predictions_and_targets(kind, n, k, rng)
            cases["%s %s" % (kind, shape)] = (y.reshape(shape), t.reshape(shape))
    np.savez(tmp_path / "cases.npz", **{name + " y": y for name, (y, _) in cases.items()},
             **{name + " t": t for name, (_, t) in cases.items()})
    out = run_keras("""
        import json, sys
        import numpy as np, keras
        data = np.load(sys.argv[1] + "/cases.npz")
        classes = {"mean_squared_error": keras.losses.MeanSquaredError(),
                   "mean_absolute_error": keras.losses.MeanAbsoluteError(),
                   "huber": keras.losses.Huber(delta=0.7),
                   "mean_squared_logarithmic_error": keras.losses.MeanSquaredLogarithmicError(),
                   "log_cosh": keras.losses.LogCosh(),
                   "mean_absolute_percentage_error":
                       keras.losses.MeanAbsolutePercentageError()}
        got = {}
        for name in sorted({key.rsplit(" ", 1)[0] for key in data.files}):
            y, t = data[name + " y"], data[name + " t"]
            kind = name.split(" ")[0]
            got[name] = float(classes[kind](t, y))
        print(json.dumps(got))
        """, tmp_path)
    keras_values = json.loads(out.strip().splitlines()[-1])
    objects = {"huber": losses.Huber(delta=0.7)}
    for name, (y, t) in cases.items():
        kind = name.split(" ")[0]
        obj = objects.get(kind) or losses.get(kind)
        want = keras_values[name]
        # the object's NumPy mean (float64) against Keras's float32
        assert abs(obj(t, y) - want) <= 1e-5 * max(1.0, abs(want)), name
        # the engine's float32 loss of the same rows
        k = y.shape[-1]
        rows, trows = y.reshape(-1, k), t.reshape(-1, k)
        net = make_net("cpu", [{"kind": "dense", "units": k, "use_bias": False}],
                       (len(rows),), len(rows), obj.engine_loss(), ADAM)
        net.set_weights([rows])
        loss_sum, _ = net.evaluate(np.eye(len(rows), dtype=np.float32), trows)
        assert abs(loss_sum / len(rows) - want) <= 1e-5 * max(1.0, abs(want)), name


def test_losses_by_name_and_config():
    for name, kind in [("mse", "mean_squared_error"), ("mae", "mean_absolute_error"),
                       ("msle", "mean_squared_logarithmic_error"),
                       ("mape", "mean_absolute_percentage_error"), ("huber", "huber"),
                       ("log_cosh", "log_cosh"), ("mean_squared_error", "mean_squared_error")]:
        assert losses.get(name).kind == kind
    assert losses.get(losses.mse).kind == "mean_squared_error"
    assert losses.get(losses.huber).kind == "huber"
    h = losses.Huber(delta=2.5, name="h")
    assert h.get_config() == {"name": "h", "reduction": "sum_over_batch_size", "delta": 2.5}
    assert losses.from_config("huber", h.get_config()).delta == 2.5
    assert losses.MeanSquaredError().get_config() == {"name": "mean_squared_error",
                                                      "reduction": "sum_over_batch_size"}
    assert losses.Huber().name == "huber_loss"
    assert losses.mse([1.0, 2.0], [[1.5], [2.0]]) == pytest.approx(0.125)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="delta: expected a finite number > 0, got -1"):
        losses.Huber(delta=-1)
    with pytest.raises(ValueError, match="delta"):
        losses.Huber(delta=float("inf"))
    with pytest.raises(ValueError, match="reduction"):
        losses.MeanSquaredError(reduction="sum")
    with pytest.raises(ValueError, match="loss.*'mse'"):
        losses.get("msee")
    with pytest.raises(ValueError, match=r"loss\['delta'\]: expected a finite number > 0"):
        make_net("cpu", [{"kind": "dense", "units": 2}], (3,), 4,
                 {"kind": "huber", "delta": 0.0}, ADAM)
    with pytest.raises(ValueError, match=r"loss\['kind'\].*mean_absolute_percentage_error"):
        make_net("cpu", [{"kind": "dense", "units": 2}], (3,), 4, {"kind": "l2"}, ADAM)


@pytest.mark.parametrize("engine", C_ENGINES)
@pytest.mark.parametrize("kind", KINDS + ["binary_crossentropy", "binary_logits"])
@pytest.mark.parametrize("n,k", [(7, 1), (5, 37)])
def test_weighted_rows(engine, kind, n, k):
    """loss['weighted']: each target row ends with the sample's weight, which
    multiplies its loss and gradient (sample_weights.py); the accuracy count
    is unweighted."""
    engine = "omp:2" if engine == "omp" else engine
    rng = np.random.default_rng(n + k)
    logits = kind == "binary_logits"
    kind = "binary_crossentropy" if logits else kind
    if kind == "binary_crossentropy":
        y = (rng.standard_normal((n, k)) if logits else rng.random((n, k))).astype(np.float32)
        t = (rng.random((n, k)) > 0.5).astype(np.float32)
    else:
        y, t = predictions_and_targets(kind, n, k, rng)
    w = (rng.random(n) * 3).astype(np.float32)
    w[1] = 0.0
    loss = dict(engine_loss(kind), weighted=True, from_logits=logits)
    net = make_net(engine, [{"kind": "dense", "units": k, "use_bias": False}], (n,), n, loss, ADAM)
    net.set_weights([y])
    x = np.eye(n, dtype=np.float32)
    rows = np.concatenate([t, w[:, None]], axis=1)
    loss_sum, correct = net.compute_gradients(x, rows)
    want_sum, want_correct, want_grad = ref.loss_forward_backward(
        kind, y.astype(np.float64), t.astype(np.float64), logits, delta=np.float32(0.7),
        weights=w.astype(np.float64))
    assert_close(loss_sum, want_sum, 1e-5, 1e-5 * n, "loss sum")
    assert_close(correct, want_correct, 0, 1e-6, "correct")
    assert_close(net.get_gradients()[0], want_grad, 1e-5, 1e-6, "gradient")
    assert not net.get_gradients()[0][1].any()          # the zero weight's row
    e_sum, _ = net.evaluate(x, rows)
    assert_close(e_sum, want_sum, 1e-5, 1e-5 * n, "evaluate loss")
    with pytest.raises(ValueError, match=r"y: expected shape \(%d, %d\)" % (n, k + 1)):
        net.compute_gradients(x, t)


def test_weighted_rows_are_refused_where_they_do_not_apply():
    with pytest.raises(ValueError, match="weighted targets are for the binary cross-entropy and "
                                         "the regression losses"):
        make_net("cpu", [{"kind": "dense", "units": 3}], (4,), 2,
                 {"kind": "categorical_crossentropy", "weighted": True}, ADAM)
    with pytest.raises(ValueError, match="weighted targets need an output of one position"):
        make_net("cpu", [{"kind": "conv2d", "units": 1, "kernel": 1}], (3, 3, 1), 2,
                 {"kind": "mean_squared_error", "weighted": True}, ADAM)

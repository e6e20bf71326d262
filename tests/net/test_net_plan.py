"""The steps a Net plans, once, for a training step (cnn.h
cnn_net_plan_length and cnn_net_plan_step_name), on the cpu engine: the seed
networks of cnncuda/seeds.py, given to tests/net/net_plan_check.c as they are
written there, must plan the step names below; a fusion switch turned off
must give the steps it replaces."""
import os
import shutil
import subprocess

import pytest

from cnncuda.seeds import SEEDS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOSSES = {"sparse_categorical_crossentropy": "sparse", "categorical_crossentropy": "categorical",
          "binary_crossentropy": "binary"}


def layer_arg(layer):
    """One layer of cnncuda.engine's list as net_plan_check takes it."""
    kind = layer["kind"]
    if kind == "conv2d":
        kh, kw = layer["kernel"]
        assert kh == kw and layer.get("strides", (1, 1)) == (1, 1)
        return "conv:%d:%d:%s" % (layer["units"], kh, layer.get("padding", "valid"))
    if kind in ("maxpool", "avgpool"):
        kh, kw = layer["kernel"]
        assert kh == kw and "strides" not in layer and "padding" not in layer
        return "%s:%d" % (kind, kh)
    if kind == "dense":
        return "dense:%d" % layer["units"]
    if kind == "activation":
        return "act:%s" % layer["activation"]
    if kind == "dropout":
        return "dropout:%g" % layer["rate"]
    assert kind in ("flatten", "batchnorm"), kind
    return kind


@pytest.fixture(scope="module")
def check_exe(tmp_path_factory):
    gcc = shutil.which("gcc")
    if not gcc:
        pytest.skip("gcc is not installed")
    sources = sorted(os.path.join(d, f) for d in ("csrc", "csrc/net", "csrc/cpu")
                     for f in os.listdir(os.path.join(ROOT, d)) if f.endswith(".c"))
    exe = str(tmp_path_factory.mktemp("plan") / "net_plan_check")
    build = subprocess.run([gcc, "-std=c11", "-O1", "-Icsrc"] + sources
                           + ["tests/net/net_plan_check.c", "-lm", "-o", exe],
                           cwd=ROOT, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    return exe


def plan(exe, name, env=None):
    """(forward names, backward names) of seed `name`'s training step."""
    seed = SEEDS[name]
    h, w, c = seed["input_shape"]
    loss = seed["loss"]
    args = [exe, str(h), str(w), str(c), LOSSES[loss["kind"]],
            "1" if loss.get("from_logits") else "0"] + [layer_arg(l) for l in seed["layers"]]
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("CNNCUDA_")}
    run_env.update(env or {})
    run = subprocess.run(args, capture_output=True, text=True, timeout=120, env=run_env)
    assert run.returncode == 0, run.stderr
    lines = dict(line.split(":", 1) for line in run.stdout.strip().splitlines())
    return lines["forward"].split(), lines["backward"].split()


# On cpu: conv2d_forward_relu and pool_backward_relu are the engine's fused
# entries; a Flatten before a Dense layer is no step (FUSE_FLATTEN); the loss
# ends the forward, its gradient the start of the backward.
EXPECTED = {
    "binary_100": (
        "conv2d_0.forward+relu maxpool_2.forward conv2d_3.forward+relu maxpool_5.forward "
        "dense_7.forward activation_8.forward dense_9.forward activation_10.forward "
        "activation_10.loss",
        "activation_10.backward dense_9.backward_filter dense_9.backward_data "
        "activation_8.backward dense_7.backward_filter dense_7.backward_data "
        "maxpool_5.backward+relu conv2d_3.backward_filter conv2d_3.backward_data "
        "maxpool_2.backward+relu conv2d_0.backward_filter"),
    "cifar10_cnn": (
        "conv2d_0.forward+relu maxpool_2.forward conv2d_3.forward+relu maxpool_5.forward "
        "conv2d_6.forward+relu dense_9.forward activation_10.forward dense_11.forward "
        "dense_11.loss",
        "dense_11.backward_filter dense_11.backward_data activation_10.backward "
        "dense_9.backward_filter dense_9.backward_data activation_7.backward "
        "conv2d_6.backward_filter conv2d_6.backward_data maxpool_5.backward+relu "
        "conv2d_3.backward_filter conv2d_3.backward_data maxpool_2.backward+relu "
        "conv2d_0.backward_filter"),
    "imagenette_cnn": (
        "conv2d_0.forward batchnorm_1.forward activation_2.forward maxpool_3.forward "
        "conv2d_4.forward batchnorm_5.forward activation_6.forward maxpool_7.forward "
        "conv2d_8.forward batchnorm_9.forward activation_10.forward maxpool_11.forward "
        "dense_13.forward activation_14.forward dropout_15.forward dense_16.forward "
        "activation_17.forward activation_17.loss",
        "activation_17.backward dense_16.backward_filter dense_16.backward_data "
        "dropout_15.backward activation_14.backward dense_13.backward_filter "
        "dense_13.backward_data maxpool_11.backward+relu batchnorm_9.backward "
        "conv2d_8.backward_filter conv2d_8.backward_data maxpool_7.backward+relu "
        "batchnorm_5.backward conv2d_4.backward_filter conv2d_4.backward_data "
        "maxpool_3.backward+relu batchnorm_1.backward conv2d_0.backward_filter"),
    "lenet5": (
        "conv2d_0.forward+relu avgpool_2.forward conv2d_3.forward+relu avgpool_5.forward "
        "dense_7.forward activation_8.forward dense_9.forward activation_10.forward "
        "dense_11.forward dense_11.loss",
        "dense_11.backward_filter dense_11.backward_data activation_10.backward "
        "dense_9.backward_filter dense_9.backward_data activation_8.backward "
        "dense_7.backward_filter dense_7.backward_data avgpool_5.backward+relu "
        "conv2d_3.backward_filter conv2d_3.backward_data avgpool_2.backward+relu "
        "conv2d_0.backward_filter"),
    "tiny_mnist": (
        "conv2d_0.forward maxpool_1.forward dense_3.forward activation_4.forward "
        "activation_4.loss",
        "activation_4.backward dense_3.backward_filter dense_3.backward_data "
        "maxpool_1.backward conv2d_0.backward_filter"),
}


@pytest.mark.parametrize("name", sorted(SEEDS))
def test_seed_plans(check_exe, name):
    forward, backward = plan(check_exe, name)
    assert (" ".join(forward), " ".join(backward)) == EXPECTED[name]


def test_relu_fusion_off_plans_the_relu_steps(check_exe):
    """CNNCUDA_FUSE=0: every ReLU is its own step, forward and backward."""
    forward, backward = plan(check_exe, "lenet5", {"CNNCUDA_FUSE": "0"})
    assert forward[:3] == ["conv2d_0.forward", "activation_1.forward", "avgpool_2.forward"]
    assert backward[-7:] == ["avgpool_5.backward", "activation_4.backward",
                             "conv2d_3.backward_filter", "conv2d_3.backward_data",
                             "avgpool_2.backward", "activation_1.backward",
                             "conv2d_0.backward_filter"]
    assert not [s for s in forward + backward if "+relu" in s]


def test_flatten_fusion_off_plans_the_flatten(check_exe):
    """CNNCUDA_FUSE_FLATTEN=0: the Flatten transposes, a step each way."""
    forward, backward = plan(check_exe, "lenet5", {"CNNCUDA_FUSE_FLATTEN": "0"})
    assert "flatten_6.forward" in forward and "flatten_6.backward" in backward
    plain_forward, plain_backward = plan(check_exe, "lenet5")
    assert [s for s in forward if not s.startswith("flatten")] == plain_forward
    assert [s for s in backward if not s.startswith("flatten")] == plain_backward

"""The host emulation of dev/cuda/step_forward_phases.cuh (dev/emu): no GPU
needed. Version 1's five phase kernels (the seed CIFAR-10 CNN's training
forward: conv1/conv2 with bias, ReLU and pool, conv3, dense1, dense2 with
softmax and sparse cross-entropy) at batches 32, 1, 5 and 33, integer and
uniform inputs, against the float64 reference phase by phase (integer
inputs: the activations and logits bit for bit); and the check fails nudged
outputs, an unwritten one and a moved argmax
(dev/emu/step_forward_check.cpp). Skipped without g++ or on other than
x86-64."""
from emulation import run_emulation


def test_step_forward_phases_emulation():
    run = run_emulation("run_step_forward.sh")
    lines = run.stdout.splitlines()
    assert lines[-1] == "step_forward_check: 88 checks, 0 failed", run.stdout
    for batch in (32, 1, 5, 33):
        for kind in ("integer", "uniform"):
            tag = "batch %d, %s inputs" % (batch, kind)
            assert any(line.startswith(tag) and " ok " in line for line in lines), (tag, run.stdout)

"""The host emulation of dev/cuda/step_backward_phases.cuh (dev/emu): no GPU
needed. Version 1's six kernels (the seed CIFAR-10 CNN's training backward:
the head with softmax and sparse cross-entropy's gradient and dense2's
gradients, dense1, conv3 with pool2's backward, conv2 with pool1's, conv1's
weight gradient, then Adam over all the weights), and version 2's (Adam in
the phases: as extra blocks of the next phase's kernel, conv1's in its weight
items), and version 4 (the whole step: step_forward's kernels, then version
2's, checked as the GPU program checks it) at batches 32, 1, 5 and 33,
integer and uniform inputs, against the float64 reference phase by phase
(integer inputs: every gradient past the head bit for bit); and the check
fails each nudged gradient, each nudged Adam output and unwritten ones
(dev/emu/step_backward_check.cpp). Then mutants of the kernels (a wrong mask,
a tap off by one, a wrong Adam term, an image skipped, an Adam element
missed in version 2) must fail. Skipped
without g++ or on other than x86-64."""
import os
import platform
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "dev", "emu", "run_step_backward.sh")
PHASES = os.path.join(ROOT, "dev", "cuda", "step_backward_phases.cuh")

needs_gxx = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or not shutil.which("g++"),
                               reason="the emulation needs g++ on x86-64")


@needs_gxx
def test_step_backward_phases_emulation():
    run = subprocess.run(["bash", SCRIPT], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    lines = run.stdout.splitlines()
    assert lines[-1] == "step_backward_check: 776 checks, 0 failed", run.stdout
    for batch in (32, 1, 5, 33):
        for kind in ("integer", "uniform"):
            for version in ("v1 (6 kernels)", "v2 (Adam in the phases)", "v4 (the whole step)"):
                tag = "batch %d, %s inputs, %s" % (batch, kind, version)
                assert any(line.startswith(tag) and " ok " in line for line in lines), (tag, run.stdout)


# (original, mutant): each must make the check fail at batch 5
MUTANTS = [
    ("p.gh1[o] = p.h1[o] > 0.0f ? acc : 0.0f;", "p.gh1[o] = p.h1[o] >= 0.0f ? acc : 0.0f;"),
    ("for (int i = 0; i < n; ++i) acc = fmaf(p.a3[(size_t)i * D_IN + k]",
     "for (int i = 1; i < n; ++i) acc = fmaf(p.a3[(size_t)i * D_IN + k]"),
    ("acc = fmaf(gs[r * H3 + s], xs[cl * Q2 * Q2 + (r + ki) * Q2 + s + kj], acc);",
     "acc = fmaf(gs[r * H3 + s], xs[cl * Q2 * Q2 + (r + kj) * Q2 + s + ki], acc);"),
    ("const int rlo = y >= 2 ? (y - 2) / 2 : 0,", "const int rlo = y >= 2 ? (y - 1) / 2 : 0,"),
    ("acc = fmaf(gs[q], xs[as[q] + ki * H0 + kj], acc);", "acc = fmaf(gs[q], xs[as[q] + ki * H0 + kj + 1], acc);"),
    ("const int dy = y - (a >> 4), dx = x - (a & 15);", "const int dy = y - (a >> 4), dx = x - (a & 7);"),
    ("__fsub_rn(1.0f, a.beta_2)", "__fsub_rn(1.0f, a.beta_1)"),
    # version 2 only: conv1's Adam in its weight items, the extra Adam blocks' range
    ("adam_element(*adam, adam->off[0] + (f * C0 + c) * 9 + t);", "adam_element(*adam, adam->off[0] + (f * C0 + c) * 9);"),
    ("if (e < a.off[k1]) adam_element(a, e);", "if (e < a.off[k1] - 1) adam_element(a, e);"),
]


@needs_gxx
@pytest.mark.parametrize("original,mutant", MUTANTS, ids=[str(i) for i in range(len(MUTANTS))])
def test_step_backward_check_fails_mutants(tmp_path, original, mutant):
    src = open(PHASES).read()
    assert src.count(original) == 1, original
    path = tmp_path / "step_backward_phases.cuh"
    path.write_text(src.replace(original, mutant))
    env = dict(os.environ, EMU_STEP_BWD_PHASES=str(path))
    # -x: the check stops after the first version that fails (a mutant needs one)
    run = subprocess.run(["bash", SCRIPT, "-x", "5"], capture_output=True, text=True, timeout=600,
                         env=env)
    assert run.returncode == 1, run.stdout + run.stderr[-2000:]
    assert "step_backward_check:" in run.stdout and ", 0 failed" not in run.stdout, run.stdout

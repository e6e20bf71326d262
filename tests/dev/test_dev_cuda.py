"""The kernel-development programs of dev/cuda.

Where nvcc is found: one program compiles without a warning (a few seconds),
and all of them build and link against the engine (``slow``: about 40 s on
two cores). Where a C++ compiler is found: sgemm's checks, run on emulated
kernels (sgemm_checks.cpp), pass the right ones and fail the wrong ones. On a
GPU machine (``gpu``): run_all.sh runs every version of every program, each
checked against its CPU reference, and writes the JSON list the
kernel-stages notebook reads.
"""
import json
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEV = os.path.join(ROOT, "dev", "cuda")
PROGRAMS = ("sgemm", "conv2d_forward", "conv2d_winograd", "maxpool_forward",
            "conv2d_backward_filter", "conv2d_backward_data_pool", "pool_forward_im2col",
            "gather_im2col", "step_forward", "step_backward")
# versions per program; the last one is the engine's own code but in
# NO_ENGINE_VERSION's programs
VERSIONS = {"sgemm": 11, "conv2d_forward": 6, "conv2d_winograd": 8, "maxpool_forward": 2,
            "conv2d_backward_filter": 5, "conv2d_backward_data_pool": 7, "pool_forward_im2col": 2,
            "gather_im2col": 2, "step_forward": 4, "step_backward": 4}
# programs with no engine version (step_backward: the fused backward and the
# whole step; BENCHMARKS.md gives the engine's step)
NO_ENGINE_VERSION = {"step_backward"}
# versions that need TF32 tensor cores (compute capability 8.0): skipped, not
# failed, on an older GPU
TENSOR_CORE_VERSIONS = {"sgemm": (9, 10)}


def find_nvcc():
    for candidate in (shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


NVCC = find_nvcc()
needs_nvcc = pytest.mark.skipif(NVCC is None or shutil.which("make") is None,
                                reason="needs nvcc and make")


def make(build, *targets, arch="90"):
    # the compiler is not under test: a sanitizer runtime preloaded into this
    # process (CI's sanitizer run) must not be preloaded into nvcc
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS")}
    env["NVCC"] = NVCC
    return subprocess.run(["make", "-C", DEV, "-j2", "ARCH=" + arch, "BUILD=" + str(build), *targets],
                          capture_output=True, text=True, env=env, timeout=600)


def assert_built_cleanly(result):
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    warnings = [line for line in output.splitlines() if "warning" in line.lower()]
    assert not warnings, "\n".join(warnings)


@needs_nvcc
def test_one_program_compiles_without_warnings(tmp_path):
    # the largest translation unit: every SGEMM stage and the engine's kernels
    assert_built_cleanly(make(tmp_path, str(tmp_path / "obj" / "sgemm.o")))
    assert (tmp_path / "obj" / "sgemm.o").stat().st_size > 0


@pytest.mark.slow
@needs_nvcc
def test_all_programs_build_and_refuse_bad_arguments(tmp_path):
    assert_built_cleanly(make(tmp_path))
    for program in PROGRAMS:
        exe = tmp_path / program
        assert os.access(exe, os.X_OK), program
        # version out of range: the usage, exit status 2, before any CUDA call
        r = subprocess.run([str(exe), str(VERSIONS[program] + 1)], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode == 2 and "usage" in r.stderr, (program, r.stdout, r.stderr)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None or
                    (shutil.which("g++") is None and shutil.which("c++") is None),
                    reason="needs make and a C++ compiler")
def test_sgemm_checks_pass_right_kernels_and_fail_wrong_ones(tmp_path):
    """sgemm_checks.cpp: emulated float32 and TF32 kernels through sgemm's own
    checks (sgemm_reference.cuh) at its batch-32 and odd shapes; each passes
    as its own precision and fails as the other, and each mutation of the
    TF32 kernel fails (about 20 s on two cores)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD",)}
    if shutil.which("g++") is None:
        env["CXX"] = "c++"
    r = subprocess.run(["make", "-C", DEV, "BUILD=" + str(tmp_path), "sgemm_checks"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert_built_cleanly(r)
    r = subprocess.run([str(tmp_path / "sgemm_checks")], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[-1] == "sgemm_checks: every expectation held", r.stdout
    verdicts = {line[5:]: line[:4].strip() for line in lines if line[:4] in ("ok  ", "FAIL", "info")}
    # round_tf32 against hand-worked values, 9 variants as expected, 1 reported
    assert len(verdicts) == 11 and list(verdicts.values()).count("ok") == 10, r.stdout
    assert verdicts["round_tf32 on 9 values worked out by hand"] == "ok", r.stdout
    # the right TF32 kernel: every check passed, its error TF32's operand rounding
    i = lines.index("ok   tf32 (cvt.rna operands, mma k steps of 8), checked as TF32")
    assert lines[i + 1].strip().startswith("failed: 0 of 58 integer, 0 of 58 uniform"), lines[i + 1]


def compute_capability():
    """The first visible GPU's compute capability, (8, 0) or (9, 0), or None:
    the device the programs run on (CUDA's numbering, CUDA_VISIBLE_DEVICES
    honored), as the cnncuda build's CUDA runtime sees it."""
    import cnncuda
    caps = cnncuda.cuda_compute_capabilities()
    return caps[0] if caps else None


def gpu_visible():
    return compute_capability() is not None


@pytest.mark.gpu
@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
@pytest.mark.skipif(not gpu_visible(),
                    reason="needs a CUDA GPU (cnncuda.cuda_compute_capabilities() finds none)")
def test_run_all_checks_every_version_and_writes_the_json(tmp_path):
    out = tmp_path / "stages.json"
    env = dict(os.environ, NVCC=NVCC, BUILD=str(tmp_path / "build"))
    r = subprocess.run(["bash", os.path.join(DEV, "run_all.sh"), str(out)], capture_output=True,
                       text=True, env=env, timeout=900)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    rows = json.loads(out.read_text())
    assert (tmp_path / "stages.log").stat().st_size > 0
    for row in rows:
        assert {"op", "version", "name", "shape", "ms", "max_err", "ok"} <= set(row), row
        assert row["ok"] is True, row
        assert row["ms"] > 0, row
    log = (tmp_path / "stages.log").read_text()
    tensor_cores = compute_capability() >= (8, 0)
    for program, count in VERSIONS.items():
        expected = [v for v in range(1, count + 1)
                    if tensor_cores or v not in TENSOR_CORE_VERSIONS.get(program, ())]
        for v in TENSOR_CORE_VERSIONS.get(program, ()):
            assert ("%s v%d:" % (program, v)) in log
            assert (("SKIPPED: needs TF32 tensor cores" in log) != tensor_cores), v
        totals = [r for r in rows if r["op"] == program and r["shape"] == "total"]
        assert [r["version"] for r in totals] == expected, program
        if program not in NO_ENGINE_VERSION:
            assert totals[-1]["name"].startswith("engine"), totals[-1]
        # every version timed at the same seed shapes
        shapes = {v: sorted(r["shape"] for r in rows if r["op"] == program and r["version"] == v)
                  for v in expected}
        assert len({tuple(s) for s in shapes.values()}) == 1, shapes
    # sgemm: conv2's three products at batch 512 too, and a total of their own
    sgemm_shapes = {r["shape"] for r in rows if r["op"] == "sgemm"}
    assert "total batch 512" in sgemm_shapes
    assert sum(s.startswith("b512 conv2 ") for s in sgemm_shapes) == 3, sgemm_shapes
    if tensor_cores:  # the TF32 versions' errors were TF32's, the others' float32's
        assert log.count("TF32 products, ") == 2, "v9 and v10 should each report TF32 products"

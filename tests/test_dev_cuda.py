"""The kernel-development programs of dev/cuda.

Where nvcc is found: one program compiles without a warning (a few seconds),
and all of them build and link against the engine (``slow``: about 40 s on
two cores). On a GPU machine (``gpu``): run_all.sh runs every version of
every program, each checked against its CPU reference, and writes the JSON
list the kernel-stages notebook reads.
"""
import json
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEV = os.path.join(ROOT, "dev", "cuda")
PROGRAMS = ("sgemm", "conv2d_forward", "maxpool_forward", "conv2d_backward_filter",
            "conv2d_backward_data_pool")
# versions per program; the last one is the engine's own code
VERSIONS = {"sgemm": 8, "conv2d_forward": 6, "maxpool_forward": 2, "conv2d_backward_filter": 5,
            "conv2d_backward_data_pool": 3}


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


def gpu_visible():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    r = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"],
                       capture_output=True, text=True)
    return r.returncode == 0 and r.stdout.strip() != ""


@pytest.mark.gpu
@pytest.mark.skipif(NVCC is None, reason="needs nvcc")
@pytest.mark.skipif(not gpu_visible(), reason="needs a CUDA GPU (nvidia-smi finds none)")
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
    for program, count in VERSIONS.items():
        totals = [r for r in rows if r["op"] == program and r["shape"] == "total"]
        assert [r["version"] for r in totals] == list(range(1, count + 1)), program
        assert totals[-1]["name"].startswith("engine"), totals[-1]
        # every version timed at the same seed shapes
        shapes = {v: sorted(r["shape"] for r in rows if r["op"] == program and r["version"] == v)
                  for v in range(1, count + 1)}
        assert len({tuple(s) for s in shapes.values()}) == 1, shapes

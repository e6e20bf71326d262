"""The CPU SGEMM, on every micro-kernel (portable C, AVX2/FMA, AVX-512), against NumPy.

Tolerance: relative to the size of the products, 2e-6 * sqrt(k) + 1e-6.
"""
import numpy as np
import pytest

from cnncuda import _C

PATHS = [pytest.param("portable", id="portable"),
         pytest.param("avx2", id="avx2",
                      marks=pytest.mark.skipif(not _C.gemm_avx2_supported(),
                                               reason="this CPU has no AVX2/FMA")),
         pytest.param("avx512", id="avx512",
                      marks=pytest.mark.skipif(not _C.gemm_avx512_supported(),
                                               reason="this CPU has no AVX-512F"))]

SIZES = [(1, 1, 1), (2, 3, 5), (7, 13, 17), (31, 33, 65), (6, 16, 1), (5, 100, 27),
         (32, 900, 27), (64, 169, 288), (33, 257, 300), (1, 64, 1024), (100, 7, 3),
         (17, 1, 40),
         # m > 144 (more than one packed A block): op(B) is packed, not read in place
         (150, 37, 300), (290, 16, 64)]


def expected(a, b, c, trans_a, trans_b, alpha, beta):
    opa = a.T if trans_a else a
    opb = b.T if trans_b else b
    out = alpha * (opa.astype(np.float64) @ opb.astype(np.float64))
    if beta != 0:
        out += beta * c
    return out


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("m,n,k", SIZES)
@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_sgemm_matches_numpy(path, m, n, k, trans_a, trans_b):
    rng = np.random.default_rng(m * 1000 + n * 10 + k)
    a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    for alpha, beta in [(1.0, 0.0), (0.5, 1.0), (-2.0, 0.25)]:
        got = _C.sgemm(a, b, c, trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta, path=path)
        want = expected(a, b, c, trans_a, trans_b, alpha, beta)
        scale = np.abs(alpha) * (np.abs(a).max() * np.abs(b).max()) + abs(beta)
        np.testing.assert_allclose(got, want, rtol=0, atol=(2e-6 * np.sqrt(k) + 1e-6) * scale * 4)


@pytest.mark.parametrize("path", PATHS)
def test_beta_zero_ignores_nan_in_c(path):
    a = np.ones((5, 7), np.float32)
    b = np.ones((7, 9), np.float32)
    c = np.full((5, 9), np.nan, np.float32)
    got = _C.sgemm(a, b, c, path=path)
    assert np.array_equal(got, np.full((5, 9), 7.0, np.float32))


@pytest.mark.parametrize("path", PATHS)
def test_k_zero_scales_c(path):
    a = np.ones((3, 0), np.float32)
    b = np.ones((0, 4), np.float32)
    c = np.full((3, 4), 2.0, np.float32)
    assert np.array_equal(_C.sgemm(a, b, c, beta=0.5, path=path), np.full((3, 4), 1.0, np.float32))
    assert np.array_equal(_C.sgemm(a, b, c, beta=0.0, path=path), np.zeros((3, 4), np.float32))


def test_sgemm_rejects_bad_arguments():
    a = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="path"):
        _C.sgemm(a, a.T, np.ones((2, 2), np.float32), path="sse9")
    with pytest.raises(ValueError, match="shapes"):
        _C.sgemm(a, a, np.ones((2, 2), np.float32))
    with pytest.raises(TypeError, match="a:"):
        _C.sgemm(np.ones((2, 3), complex), a.T, np.ones((2, 2), np.float32))


@pytest.mark.skipif(not _C.gemm_avx512_supported(), reason="this CPU has no AVX-512F")
@pytest.mark.parametrize("m,n,k", SIZES)
def test_avx512_gives_the_avx2_bits(m, n, k):
    """The AVX-512 kernel runs each C element's chain of fused multiply-adds
    in the AVX2 kernel's order: the same bits, every shape and transpose."""
    rng = np.random.default_rng(k)
    for trans_a, trans_b in [(0, 0), (1, 0), (0, 1), (1, 1)]:
        a = rng.standard_normal((k, m) if trans_a else (m, k)).astype(np.float32)
        b = rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32)
        c = rng.standard_normal((m, n)).astype(np.float32)
        for alpha, beta in [(1.0, 0.0), (-2.0, 0.25)]:
            args = dict(trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta)
            np.testing.assert_array_equal(_C.sgemm(a, b, c, path="avx512", **args),
                                          _C.sgemm(a, b, c, path="avx2", **args))


def _intel():
    """Whether /proc/cpuinfo names an Intel CPU (False where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.split(":")[-1].strip() == "GenuineIntel"
                       for line in f if line.startswith("vendor_id"))
    except OSError:
        return False


def default_path():
    """AVX-512 on Intel CPUs with AVX-512F (measured faster there), else AVX2
    where the CPU has it (AMD's Zen 4 runs 512-bit operations as two halves:
    AVX-512 was slower there), else portable C."""
    if _C.gemm_avx512_supported() and _intel():
        return "avx512"
    return "avx2" if _C.gemm_avx2_supported() else "portable"


@pytest.mark.parametrize("name", ["portable", "avx2", "avx512", "unknown", None])
def test_the_environment_picks_the_path(name):
    """CNNCUDA_GEMM=portable|avx2|avx512 picks the engines' micro-kernel where
    the CPU has it; anything else, no variable, and an unsupported choice
    give the default (default_path)."""
    import os
    import subprocess
    import sys
    env = dict(os.environ)
    env.pop("CNNCUDA_GEMM", None)
    if name is not None:
        env["CNNCUDA_GEMM"] = name
    out = subprocess.run([sys.executable, "-c", "import cnncuda._C as C; print(C.gemm_path())"],
                         capture_output=True, text=True, env=env, check=True).stdout.strip()
    supported = {"portable": True, "avx2": _C.gemm_avx2_supported(),
                 "avx512": _C.gemm_avx512_supported()}
    assert out == (name if supported.get(name) else default_path())


NET_CODE = """
import sys
import numpy as np
from cnncuda import _C
from cnncuda.engine import make_net
from cnncuda.seeds import seed_network, synthetic_data
assert _C.gemm_path() == sys.argv[2], _C.gemm_path()
out = []
for model in ("cifar10_cnn", "lenet5"):
    spec = seed_network(model)
    x, y = synthetic_data(model, 40)
    for device in ("cpu", "omp:3"):
        net = make_net(device, spec["layers"], spec["input_shape"], 16, spec["loss"],
                       spec["optimizer"], seed=2)
        net.set_data(x, y)
        net.set_order(np.arange(40, dtype=np.int32))
        net.train_range(0, 40, 16)
        out += [w.ravel() for w in net.get_weights()] + [net.predict(x).ravel()]
np.save(sys.argv[1], np.concatenate(out))
"""


@pytest.mark.skipif(not _C.gemm_avx512_supported(), reason="this CPU has no AVX-512F")
def test_networks_train_to_the_same_bits_on_avx2_and_avx512(tmp_path):
    """Whichever of the two is the default here, both paths train the seed
    networks to the same weights on cpu and omp (GEMMs and pooling)."""
    import os
    import subprocess
    import sys
    import cnncuda
    root = os.path.dirname(os.path.dirname(os.path.abspath(cnncuda.__file__)))
    runs = {}
    for path in ("avx2", "avx512"):
        env = dict(os.environ, CNNCUDA_GEMM=path, OPENBLAS_NUM_THREADS="1",
                   PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
        target = str(tmp_path / (path + ".npy"))
        out = subprocess.run([sys.executable, "-c", NET_CODE, target, path], env=env,
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        runs[path] = np.load(target)
    assert np.array_equal(runs["avx2"], runs["avx512"])

"""The CNNCUDA_* switches: read in one place per layer (csrc/switches.c, the
engine's; cnncuda/switches.py, the Python layer's; build_tools/switches.py,
the build's), strictly, and README's table lists exactly those."""
import os
import re

import pytest

import cnncuda
from cnncuda import _C, switches
from cnncuda.engine import make_net
from cnncuda.seeds import seed_network

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cnncuda.__file__)))
ENGINE = sorted(_C.switches())
BOOLEAN = [name for name in ENGINE if name not in (
    "CNNCUDA_CUDNN_ALGO", "CNNCUDA_GEMM")]


def _tiny_net(engine="cpu"):
    s = seed_network("tiny_mnist")
    return make_net(engine, s["layers"], s["input_shape"], 4, s["loss"], s["optimizer"])


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    for name in ENGINE:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("name", ENGINE)
def test_a_bad_value_names_the_switch(name, monkeypatch):
    monkeypatch.setenv(name, "maybe")
    with pytest.raises(ValueError, match=r"^%s: expected .*, got 'maybe'$" % name):
        _C.switches()
    with pytest.raises(ValueError, match=r"^%s: expected " % name):
        _tiny_net("cpu")         # refused when a Net is made, on every engine
    with pytest.raises(ValueError, match=r"^%s: expected " % name):
        _tiny_net("omp:2")


@pytest.mark.parametrize("name", BOOLEAN)
def test_booleans_take_the_six_words(name, monkeypatch):
    default = _C.switches()[name]
    for word, value in [("1", 1), ("on", 1), ("TRUE", 1), ("0", 0), ("Off", 0), ("false", 0),
                        ("", default)]:
        monkeypatch.setenv(name, word)
        assert _C.switches()[name] == value, word
    monkeypatch.setenv(name, "yes")
    with pytest.raises(ValueError, match="expected 1, 0, on, off, true or false, got 'yes'"):
        _C.switches()


def test_choices_are_named_in_the_error(monkeypatch):
    monkeypatch.setenv("CNNCUDA_CUDNN_ALGO", "fastest")
    with pytest.raises(ValueError, match="^CNNCUDA_CUDNN_ALGO: expected 'measured', 'heuristic' "
                                         "or 'nondeterministic', got 'fastest'$"):
        _C.switches()
    monkeypatch.setenv("CNNCUDA_CUDNN_ALGO", "Heuristic")
    assert _C.switches()["CNNCUDA_CUDNN_ALGO"] == 1


def test_gemm_path_the_cpu_lacks_is_refused(monkeypatch):
    if _C.gemm_avx512_supported():
        pytest.skip("this CPU runs every GEMM path")
    monkeypatch.setenv("CNNCUDA_GEMM", "avx512")
    with pytest.raises(ValueError, match="CNNCUDA_GEMM: 'avx512' needs a CPU with AVX-512F"):
        _tiny_net("cpu")


def test_python_switches(monkeypatch):
    monkeypatch.setenv("CNNCUDA_SYSTEM_LIBS", "ON")
    assert switches.system_libs() is True
    monkeypatch.setenv("CNNCUDA_SYSTEM_LIBS", "sometimes")
    with pytest.raises(ValueError, match="CNNCUDA_SYSTEM_LIBS: expected 1, 0, on, off, true or "
                                         "false, got 'sometimes'"):
        switches.system_libs()
    assert switches.port({}) is None
    assert switches.port({"CNNCUDA_PORT": "4000"}) == 4000
    for bad in ("0", "65536", "http"):
        with pytest.raises(ValueError, match="CNNCUDA_PORT: expected a port number"):
            switches.port({"CNNCUDA_PORT": bad})


def test_build_switches():
    from build_tools import switches as build
    assert build.cuda_wanted({}) and build.cuda_wanted({"CNNCUDA_CUDA": "on"})
    assert not build.cuda_wanted({"CNNCUDA_CUDA": "False"})
    with pytest.raises(SystemExit, match="CNNCUDA_CUDA: expected 1, 0, on, off, true or false"):
        build.cuda_wanted({"CNNCUDA_CUDA": "no"})


def _sources(*folders, suffixes):
    for folder in folders:
        path = os.path.join(ROOT, folder)
        if os.path.isfile(path):
            yield path
            continue
        for base, _, files in os.walk(path):
            for f in files:
                if f.endswith(suffixes):
                    yield os.path.join(base, f)


def _names_in(path):
    with open(path, encoding="utf-8") as f:
        return set(re.findall(r'"(CNNCUDA_[A-Z0-9_]+)"', f.read()))


def test_nothing_else_reads_a_switch():
    """getenv / os.environ of a CNNCUDA_ name only in the three switch files."""
    own = {os.path.join(ROOT, p) for p in ("csrc/switches.c", "cnncuda/switches.py",
                                          "build_tools/switches.py")}
    readers = re.compile(r'(getenv|environ)[^\n]{0,40}"CNNCUDA_')
    found = [p for p in _sources("csrc", "cuda", "cnncuda", "build_tools", "setup.py",
                                 suffixes=(".c", ".h", ".cu", ".cuh", ".py"))
             if p not in own and readers.search(open(p, encoding="utf-8").read())]
    assert found == []


def test_readme_lists_exactly_the_switches():
    read = set(ENGINE) | _names_in(os.path.join(ROOT, "cnncuda/switches.py")) | \
        _names_in(os.path.join(ROOT, "build_tools/switches.py"))
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    table = readme[readme.index("## Switches"):]
    table = table[:table.index("\n## ")]
    rows = set(re.findall(r"^\| `(CNNCUDA_[A-Z0-9_]+)` \|", table, re.M))
    assert rows == read


@pytest.mark.parametrize("word", ["0", "off", "False"])
def test_off_in_any_spelling_turns_a_fusion_off(word, monkeypatch):
    """CNNCUDA_FUSE=off used to leave fusion on (only "0" was read as off)."""
    s = seed_network("cifar10_cnn")
    fused = make_net("cpu", s["layers"], s["input_shape"], 4, s["loss"], s["optimizer"]).plan()
    monkeypatch.setenv("CNNCUDA_FUSE", word)
    plain = make_net("cpu", s["layers"], s["input_shape"], 4, s["loss"], s["optimizer"]).plan()
    assert fused[0] == "conv2d_0.forward+relu"
    assert plain[:2] == ["conv2d_0.forward", "activation_1.forward"]

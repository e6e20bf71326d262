"""No leaks: resident memory over 200 model lifetimes, and LeakSanitizer over
the C core and over the binding.

* RSS: 200 cycles of build, compile, fit, predict, evaluate, weights out and
  in, refused calls, delete, on each C engine built; after 20 cycles of
  warm-up the resident set (/proc/self/statm) may grow by at most
  RSS_BOUND. A cycle moves about 2 MiB through the engine (a resident copy
  of the training set, a converted float64 batch, the outputs), so leaking
  any of it, or a Net's buffers, breaks the bound within a few cycles.
* The C core alone: tests/reliability/reliability_core_cycles.c is built with
  -fsanitize=address,undefined with csrc/*.c, csrc/net/*.c and
  csrc/cpu/*.c and run for CORE_CYCLES cycles per host engine;
  LeakSanitizer (and ASan, UBSan) must report nothing.
* The binding: a Python process under LeakSanitizer (liblsan preloaded, or
  libasan where the extension itself is the sanitizer build) runs Keras
  cycles and raw-binding calls, error paths included, with PYTHONMALLOC=malloc
  so that every object is a malloc block; of the leaks LeakSanitizer lists
  (CPython and NumPy keep some at exit) none may have been allocated from
  our code (a stack frame in csrc/ or in cnncuda/_C).

The GPU figure (device memory back to its level after a model is deleted)
needs a GPU machine and is not checked here.
"""
import ctypes
import gc
import os
import re
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cnncuda
from cnncuda.keras import layers, models
from conftest import engine_params

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RSS_BOUND = 2 << 20
WARM_UP, CYCLES = 20, 200
CORE_CYCLES = 10
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def lifetime(device, i, x, y):
    model = models.Sequential([
        layers.Conv2D(8, 3, padding="same", activation="relu", input_shape=(12, 12, 3)),
        layers.BatchNormalization(), layers.MaxPooling2D(), layers.Dropout(0.2),
        layers.Flatten(), layers.Dense(10)], seed=i)
    model.compile(optimizer="adam" if i % 2 else "sgd", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], device=device)
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    model.predict(x, verbose=0)
    model.evaluate(x, y, verbose=0)
    model.set_weights([w * 0.5 for w in model.get_weights()])
    bad = x.copy()
    bad[3, 1, 1, 1] = np.nan
    for call in (lambda: model.predict(bad, verbose=0), lambda: model.fit(bad, y, verbose=0),
                 lambda: model.set_weights(model.get_weights()[:-1])):
        with pytest.raises(ValueError):
            call()
    net = model._net
    with pytest.raises(ValueError):
        net.predict(bad)                   # the binding's own check, after its float32 copy
    with pytest.raises(ValueError):
        net.train_batch(x[:40], y[:40])    # past max_batch
    del model, net
    gc.collect()


def trim():
    """Hands free heap pages back to the system (glibc), so that the resident
    set counts live memory rather than what the allocator keeps around."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")


@pytest.mark.skipif(UNDER_ASAN, reason="AddressSanitizer's quarantine holds freed memory "
                    "(up to 256 MiB): resident memory says nothing there")
@pytest.mark.parametrize("device", engine_params(("cpu", "omp")))
def test_resident_memory_holds_over_200_lifetimes(device):
    rng = np.random.default_rng(0)
    x = rng.random((512, 12, 12, 3))       # float64: every call converts it
    y = rng.integers(0, 10, 512)
    for i in range(WARM_UP):
        lifetime(device, i, x, y)
    samples = []
    for i in range(CYCLES):
        lifetime(device, WARM_UP + i, x, y)
        trim()
        samples.append(rss())
    # medians of the first and the last 20 samples: a leak grows steadily,
    # the allocator's noise comes and goes
    first, last = np.median(samples[:20]), np.median(samples[-20:])
    grown = last - first
    print("%s: resident %.1f MiB after warm-up, %+.2f MiB over %d cycles (range %.2f MiB)"
          % (device, first / 2**20, grown / 2**20, CYCLES,
             (max(samples) - min(samples)) / 2**20))
    assert grown <= RSS_BOUND, "resident memory grew by %d bytes over %d cycles" % (grown, CYCLES)


@pytest.mark.parametrize("device", engine_params())
def test_no_network_outlives_its_model(device):
    """Every core network made in a lifetime (fit, predict, refused calls) is
    freed once its model is gone: the binding's count of live networks comes
    back to where it was, on every engine, the GPU ones included."""
    rng = np.random.default_rng(1)
    x = rng.random((96, 12, 12, 3))
    y = rng.integers(0, 10, 96)
    gc.collect()
    before = cnncuda._C.live_nets()
    model = models.Sequential([layers.Flatten(input_shape=(12, 12, 3)), layers.Dense(10)])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", device=device)
    model.predict(x, verbose=0)
    assert cnncuda._C.live_nets() == before + 1
    del model
    gc.collect()
    assert cnncuda._C.live_nets() == before
    for i in range(3):
        lifetime(device, i, x, y)
    assert cnncuda._C.live_nets() == before


EXIT_SCRIPT = """
import atexit, sys
def check():                 # registered before cnncuda: runs after its release
    import cnncuda
    try:
        KEPT.predict(X)
        print("used after exit release")
    except RuntimeError as e:
        print("refused:", e)
    print("live at exit:", cnncuda._C.live_nets())
atexit.register(check)
import numpy as np
import cnncuda
from cnncuda.engine import make_net
X = np.zeros((2, 4, 4, 1), np.float32)
def held_by_a_cycle():
    net = make_net(sys.argv[1], [{"kind": "flatten"}, {"kind": "dense", "units": 3}], (4, 4, 1),
                   4, {"kind": "sparse_categorical_crossentropy"}, {"kind": "adam"})
    cycle = [net]
    cycle.append(cycle)
KEPT = make_net(sys.argv[1], [{"kind": "flatten"}, {"kind": "dense", "units": 3}], (4, 4, 1),
                4, {"kind": "sparse_categorical_crossentropy"}, {"kind": "adam"})
held_by_a_cycle()
import gc; gc.disable()      # the cycle stays until exit
print("live before exit:", cnncuda._C.live_nets())
"""


@pytest.mark.parametrize("device", engine_params())
def test_networks_alive_at_exit_hand_their_engine_memory_back(device, tmp_path):
    """A network still referenced when the interpreter exits (a global, a
    cycle the collector never reached) is released by cnncuda's exit
    handler, before the CUDA runtime goes; a later exit handler that uses it
    gets RuntimeError, not a crash."""
    script = tmp_path / "exit.py"
    script.write_text(EXIT_SCRIPT)
    done = subprocess.run([sys.executable, str(script), device], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert done.returncode == 0, done.stderr
    assert "live before exit: 2" in done.stdout
    assert "refused: this Net's engine memory was released" in done.stdout
    assert "live at exit: 0" in done.stdout, done.stdout


def sanitizer_runtime(name):
    """The path of gcc's lib<name>.so, or None."""
    gcc = shutil.which("gcc")
    if not gcc:
        return None
    path = subprocess.run([gcc, "-print-file-name=lib%s.so" % name], capture_output=True,
                          text=True).stdout.strip()
    return path if os.path.isabs(path) and os.path.exists(path) else None


def test_the_c_core_under_leak_sanitizer(tmp_path):
    if not sanitizer_runtime("asan"):
        pytest.skip("gcc with AddressSanitizer (libasan) is not installed")
    sources = sorted(os.path.join(d, f) for d in ("csrc", "csrc/net", "csrc/cpu")
                     for f in os.listdir(os.path.join(ROOT, d)) if f.endswith(".c"))
    exe = str(tmp_path / "cycles")
    flags = ["-std=c11", "-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
             "-fno-sanitize-recover=all"]
    if "omp" in cnncuda.build_info()["engines"]:
        flags += ["-fopenmp", "-DCNNCUDA_HAVE_OPENMP=1"]
    build = subprocess.run(["gcc"] + flags + ["-Icsrc"] + sources
                           + ["tests/reliability/reliability_core_cycles.c", "-lm", "-o", exe],
                           cwd=ROOT, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1:"
               "max_allocation_size_mb=64", UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1")
    env.pop("LD_PRELOAD", None)
    run = subprocess.run([exe, str(CORE_CYCLES)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    print(run.stdout)
    reports = re.findall(r"ERROR: \w+Sanitizer.*|runtime error:.*", run.stderr)
    assert run.returncode == 0 and not reports, run.stderr[-6000:]
    assert "cpu: %d cycles" % CORE_CYCLES in run.stdout


BINDING_CYCLES = """
import gc
import numpy as np
import cnncuda
from cnncuda import _C
from cnncuda.keras import layers, models

rng = np.random.default_rng(0)
x = rng.random((64, 8, 8, 2))
y = rng.integers(0, 3, 64)
bad = x.copy()
bad[1, 2, 3, 1] = np.inf
for device in DEVICES:
    for i in range(3):
        m = models.Sequential([
            layers.Conv2D(4, 3, padding="same", activation="relu", input_shape=(8, 8, 2)),
            layers.BatchNormalization(), layers.MaxPooling2D(), layers.Dropout(0.2),
            layers.Flatten(), layers.Dense(3)], seed=i)
        m.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], device=device)
        m.fit(x, y, batch_size=16, epochs=1, verbose=0)
        m.predict(x, verbose=0)
        m.evaluate(x, y, verbose=0)
        m.set_weights(m.get_weights())
        net = m._net
        state = net.get_optimizer_state()
        net.set_optimizer_state(state)
        net.compute_gradients(x[:16], y[:16])
        net.get_gradients()
        out = net.forward(x[:16], training=True)
        net.backward(np.ones_like(out))
        for call in (lambda: net.predict(bad), lambda: net.train_batch(bad[:16], y[:16]),
                     lambda: net.evaluate(x, y + 5), lambda: net.set_weights([x]),
                     lambda: net.set_optimizer_state(dict(state, steps=-1)),
                     lambda: net.set_data(bad, y), lambda: net.set_order(np.arange(3)),
                     lambda: net.backward(np.ones((2, 3))),
                     lambda: net.train_batch(x[:16].astype(complex), y[:16])):
            try:
                call()
            except (TypeError, ValueError):
                pass
        for spec in ([{"kind": "dense", "units": 2**40}], [{"kind": "lstm"}],
                     [{"kind": "dense", "units": 3, "activation": "relu"}]):
            try:
                _C.Net(device, spec, (4,), 4, {"kind": "binary_crossentropy"}, {"kind": "adam"})
            except (TypeError, ValueError):
                pass
        del m, net
        gc.collect()
print("binding cycles done")
"""


def test_the_binding_under_leak_sanitizer(tmp_path):
    preload = os.environ.get("LD_PRELOAD", "")
    if UNDER_ASAN:
        # the sanitizer build of the extension (CI's second run): ASan's own
        # leak checker, with the runtimes already preloaded
        options = {"ASAN_OPTIONS": "detect_leaks=1:allocator_may_return_null=1:"
                   "fast_unwind_on_malloc=0:malloc_context_size=40:log_path=%s/lsan" % tmp_path,
                   "LSAN_OPTIONS": "exitcode=0"}      # CPython's own leaks are judged below
    else:
        lsan = sanitizer_runtime("lsan")
        if not lsan:
            pytest.skip("gcc's LeakSanitizer runtime (liblsan) is not installed")
        preload = lsan
        options = {"LSAN_OPTIONS": "fast_unwind_on_malloc=0:malloc_context_size=40:exitcode=0:"
                   "log_path=%s/lsan" % tmp_path}
    devices = [d for d in ("cpu", "omp") if d in cnncuda.devices()]
    script = "DEVICES = %r\n" % devices + textwrap.dedent(BINDING_CYCLES)
    env = dict(os.environ, LD_PRELOAD=preload, PYTHONMALLOC="malloc", **options)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(cnncuda.__file__))]
                                        + sys.path)
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=600, cwd=str(tmp_path))
    assert run.returncode == 0 and "binding cycles done" in run.stdout, run.stderr[-6000:]
    text = "".join(open(tmp_path / f).read() for f in os.listdir(tmp_path)
                   if f.startswith("lsan"))
    blocks = re.split(r"\n(?=(?:Direct|Indirect) leak of)", text)
    ours = [b for b in blocks if re.match(r"(Direct|Indirect) leak of", b)
            and re.search(r"\bcsrc/|cnncuda/_C\.", b)]
    found = len([b for b in blocks if re.match(r"(Direct|Indirect) leak of", b)])
    print("LeakSanitizer: %d leak records at exit, %d from cnncuda" % (found, len(ours)))
    assert not ours, "\n\n".join(ours)[:8000]
    assert "ERROR: AddressSanitizer" not in text and "runtime error" not in text, text[:8000]

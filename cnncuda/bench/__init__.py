"""Seconds per epoch of the seed networks on every engine of this machine,
with PyTorch and JAX beside them where they are installed.

    python -m cnncuda.bench --model cifar10_cnn --plot bench.png --json bench.json

prints an environment header (CPU, GPU, driver, CUDA, cuDNN, library
versions), Keras-style progress, and a table of seconds per epoch, images per
second, the speedup over the sequential ``cpu`` engine, the final training
and validation accuracy, peak memory (host resident memory for the CPU rows,
device memory for the GPU rows) and, where the GPU's driver reports it, joules
per epoch. Each row trains the way fit does: the data on the engine once, a
shuffled order per epoch, the whole epoch in one engine call, timed after a
warm-up and between two synchronisations; GPU rows are timed with CUDA events
(PyTorch's, and the engine's where the binding reports them; otherwise the
wall clock, and the row says so). With several epochs, the best is reported.
In a terminal or Jupyter, Keras's bar is redrawn during each epoch of our
engines: the epoch then runs in engine calls of about 0.05 s, the sums read
only when the bar redraws, and a GPU row's time is its calls' CUDA-event
times added up (bench/cnncuda.py says why that stays honest).

Data: the seed's real data set when it is on this machine (CIFAR-10, MNIST or
Fashion-MNIST, Imagenette; never downloaded unless ``--download``), otherwise
synthetic data of the same shape; every row, the table and the plot say
which. ``--images N`` takes the first N training images.

Frameworks (``--frameworks auto``, the default: those importable): PyTorch
eager and with the whole step in a CUDA graph where torch sees a GPU, else
PyTorch on one CPU thread; JAX with a jitted step on its default device.
``--torch-threads 1,2,4`` and ``--torch-gpu`` ask for PyTorch rows
explicitly.

Precision (``--precision``): ``float32``, the default, is strict IEEE
float32 everywhere (PyTorch and JAX with TF32 off). ``tf32`` builds our GPU
engines' networks with TF32 tensor cores allowed (make_net's
``precision='tf32'``; rows ``cuda-tf32``, ``cudnn-tf32``), lets PyTorch's GPU
rows use TF32 in cuDNN and matrix products (``torch-cuda-tf32``) and JAX's
GPU row its default matmul precision (``jax-gpu-tf32``), so GPU rows stay
like for like; CPU rows have no TF32 and stay float32. ``bf16`` and
``fp16`` build our GPU engines' networks with 16-bit tensor-core products
(make_net's ``precision='bf16'``/``'fp16'``, keras.mixed_precision's policies;
rows ``cuda-bf16``, ``cudnn-fp16``, ...) and run PyTorch's GPU rows under
``torch.autocast`` in that dtype (no GradScaler: it reads back to the host
every step, which a CUDA graph cannot hold; ``torch-cuda-bf16``); JAX's rows
stay float32 (``jax-gpu``, its precision float32). Every row's
``precision`` says which it ran at.

The user's figure: ``--script`` also times, for each engine, one ``fit``
call as the seed script makes it (float64 input, validation after every
epoch, the progress bar on; cnncuda/bench/script.py), and prints it beside
the engine's epoch: fit's seconds per epoch, the fixed cost before the first
epoch, the validation pass. ``--epochs`` sets that call's epochs too.

CPU scaling: ``--threads 1,2,4,8,16`` adds an ``omp:N`` row per count (and,
without ``--device``, times only numpy and cpu besides); ``--torch-threads``
at the same counts gives each of our rows its ratio to PyTorch (``vs
torch``, ``cpu`` against 1 thread)::

    python -m cnncuda.bench --model cifar10_cnn --model lenet5 --device numpy \\
        --device cpu --threads 1,2,4,8,16 --torch-threads 1,2,4,8,16 --images 10000
"""
import argparse
import gc
import json
import os
import sys

from .. import _C
from .._C import EngineUnavailableError
from ..engine import PRECISIONS
from ..runtime import devices, get_num_threads
from .cnncuda import EngineRunner, row_precision
from .data import DATA_MODES, bench_data, check_real
from .env import environment, format_environment
from .table import add_speedups, format_table
from .timing import time_row
from ..checks import choice, nonnegative_int, positive_int
from ..datasets import DatasetNotFoundError
from ..engine import parse_device
from ..seeds import SEEDS

__all__ = ["run", "main", "split_engines", "write_json", "ENGINE_NAMES", "FRAMEWORKS"]

ENGINE_NAMES = ("numpy", "cpu", "omp", "cuda", "cudnn")
FRAMEWORKS = ("torch", "jax")


def _why_not(name):
    """None when engine `name` can run here, else the reason."""
    return None if name == "numpy" else _C.engine_status(name)


def _check_engine(device, arg="engines"):
    if not isinstance(device, str):
        raise TypeError("%s: expected engine names such as 'cpu' or 'omp:4', got %r"
                        % (arg, device))
    try:
        name, _ = parse_device(device)
    except ValueError:
        name = None
    if name is not None and name != "omp" and ":" in device:
        name = None
    if name is None:
        raise ValueError("%s: expected engine names such as 'cpu' or 'omp:4' (threads >= 1, for "
                         "omp only), got %r" % (arg, device))
    if name not in ENGINE_NAMES:
        raise ValueError("%s: expected one of %s (or 'omp:N', or 'all'), got %r"
                         % (arg, ", ".join(ENGINE_NAMES), device))
    return name


def split_engines(engines):
    """(runnable, skipped): the engines of `engines` that can run here, in
    order, and {engine: why not} for the others (for notebooks that list
    engines a machine may not have)."""
    runnable, skipped = [], {}
    for device in engines:
        reason = _why_not(_check_engine(device))
        if reason:
            skipped[device] = reason
        else:
            runnable.append(device)
    return runnable, skipped


def _engine_list(engines, threads):
    if engines is None:
        chosen = ["numpy", "cpu"] if threads else [d for d in devices() if d != "numpy"]
    else:
        if isinstance(engines, str):
            engines = [engines]
        chosen = []
        for device in engines:
            chosen += devices() if device == "all" else [device]
        if not chosen:
            raise ValueError("engines: expected at least one engine, got %r" % (engines,))
    out = []
    for device in chosen + ["omp:%d" % t for t in threads]:
        name = _check_engine(device)
        reason = _why_not(name)
        if reason:
            raise EngineUnavailableError("engines: %r cannot run here (%s); engines here: %s"
                                         % (device, reason, ", ".join(devices())))
        if device == "omp":
            device = "omp:%d" % get_num_threads()
        if device not in out:
            out.append(device)
    return out


def _int_list(values, arg):
    if values is None:
        return []
    if not isinstance(values, (list, tuple)):
        values = [values]
    return [positive_int(v, arg) for v in values]


def _framework_choice(frameworks):
    """(names, auto): which frameworks add their automatic rows."""
    if frameworks in (None, "none"):
        return [], False
    if frameworks == "auto":
        return list(FRAMEWORKS), True
    names = frameworks.split(",") if isinstance(frameworks, str) else list(frameworks)
    for name in names:
        if name not in FRAMEWORKS:
            raise ValueError("frameworks: expected 'auto', 'none' or names among %s, got %r"
                             % (", ".join(FRAMEWORKS), frameworks))
    return names, False


class _Plan:
    """The checked arguments of one run."""


def _plan(models, engines, batch_size, images, epochs, seed, torch_threads, torch_gpu, threads,
          steps, data, val_images, frameworks, download, verbose, plot_path, precision="float32",
          script=False):
    p = _Plan()
    if not isinstance(script, bool):
        raise TypeError("script: expected True or False, got %r" % (script,))
    p.script = script
    p.precision = row_precision(True, precision)
    if isinstance(models, str):
        models = [models]
    if not models:
        raise ValueError("models: expected at least one of %s, got %r" % (", ".join(SEEDS), models))
    for model in models:
        if model not in SEEDS:
            raise ValueError("models: expected names among %s, got %r" % (", ".join(SEEDS), model))
    p.models = list(dict.fromkeys(models))
    p.batches = _int_list(batch_size, "batch_size")
    p.images = positive_int(images, "images") if images is not None else None
    p.steps = positive_int(steps, "steps") if steps is not None else None
    if p.images is not None and p.steps is not None:
        raise ValueError("steps: expected images or steps, not both; got images=%d, steps=%d"
                         % (p.images, p.steps))
    p.epochs = positive_int(epochs, "epochs")
    p.seed = nonnegative_int(seed, "seed")
    p.torch_threads = _int_list(torch_threads, "torch_threads")
    p.torch_gpu = bool(torch_gpu)
    p.engines = _engine_list(engines, _int_list(threads, "threads"))
    p.data = choice(data, "data", DATA_MODES)
    p.val_images = nonnegative_int(val_images, "val_images") if val_images is not None else None
    p.frameworks, p.auto = _framework_choice(frameworks)
    p.download = bool(download)
    if verbose not in (0, 1, 2) or isinstance(verbose, bool):
        raise ValueError("verbose: expected 0, 1 or 2, got %r" % (verbose,))
    p.verbose = verbose
    if plot_path:  # before the run, not after it
        import importlib.util
        if importlib.util.find_spec("matplotlib") is None:
            raise ImportError("plot: the plot needs matplotlib: pip install matplotlib (or "
                              "pip install \"cnncuda[bench]\")")
    if p.data == "real":
        for model in p.models:
            check_real(model, p.download)
    return p


def _torch_variants(p, log):
    """[(variant, threads)] of the PyTorch rows asked for and possible."""
    from . import torch as bench_torch
    asked = p.torch_threads or p.torch_gpu or "torch" in p.frameworks
    if not asked:
        return []
    if not bench_torch.available():
        log("torch is not installed: no PyTorch rows")
        return []
    import torch
    gpu = torch.cuda.is_available()
    variants = [("cpu", t) for t in p.torch_threads]
    if p.torch_gpu or ("torch" in p.frameworks and not p.torch_threads and gpu):
        if gpu:
            variants += [("cuda", 1), ("cuda-graph", 1)]
        else:
            log("PyTorch sees no CUDA GPU: no PyTorch GPU rows")
    elif "torch" in p.frameworks and not p.torch_threads:
        variants.append(("cpu", 1))
    return variants


def _jax_wanted(p, log):
    if "jax" not in p.frameworks:
        return False
    from . import jax as bench_jax
    if not bench_jax.available():
        log("jax is not installed: no JAX rows")
        return False
    return True


def _framework_rows(p, model, batch, data, log):
    rows = []
    for variant, threads in p.torch_variants:
        from .torch import TorchRunner
        rows.append(_row(lambda: TorchRunner(model, data, batch, variant, threads, p.seed,
                                             precision=p.precision),
                         "torch-%s" % variant, p, model, batch, data, log))
    if p.jax:
        from .jax import JaxRunner
        rows.append(_row(lambda: JaxRunner(model, data, batch, p.seed, precision=p.precision),
                         "jax", p, model, batch, data, log))
    return [r for r in rows if r is not None]


def _row(make_runner, label, p, model, batch, data, log):
    """A framework's row, or None (with a note) where it cannot build the model."""
    if p.verbose:
        log("-- %s on %s" % (model, label))
    try:
        return time_row(make_runner, model, batch, data, p.epochs, log, p.verbose)
    except ValueError as err:
        if "not supported" not in str(err):
            raise
        log("%s: no %s row (%s)" % (model, label, err))
        return None
    finally:
        gc.collect()


def _script_rows(p, model, batch, data, log):
    """One fit call per engine, as the seed script makes it (bench_script)."""
    from .script import script_row
    out = []
    for device in p.engines:
        log("-- %s on %s: fit as the script calls it, %d epochs" % (model, device, p.epochs))
        row = script_row(model, device, data, batch, p.epochs, p.seed,
                         verbose=1 if p.verbose else 0)
        row["kind"] = "script"
        out.append(row)
        gc.collect()
    return out


def write_json(path, rows, env, command=None):
    """Writes {"environment", "command", "rows"} to `path` (folders made)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        json.dump({"environment": env, "command": command, "rows": rows}, f, indent=2)


def run(models=("cifar10_cnn",), engines=None, batch_size=None, images=None, epochs=1, seed=0,
        torch_threads=(), torch_gpu=False, log=print, threads=(), steps=None, data="auto",
        val_images=None, frameworks="auto", download=False, verbose=1, json_path=None,
        plot_path=None, command=None, precision="float32", script=False):
    """Times every model on every engine (and on ``omp:N`` for each N of
    `threads`), then PyTorch and JAX where asked and installed; returns the
    rows, printed as a table through `log`, and written to `json_path` and
    plotted to `plot_path` when given.

    models: seed names; engines: engine names, 'all' for every engine here
    (default: every engine here but numpy); batch_size: an int or a list
    (default: each seed's); images or steps: per epoch (default: the whole
    training set); epochs: timed epochs (the best is reported); data: 'auto',
    'real' or 'synthetic'; val_images: validation images after each epoch,
    not timed (default: the whole test split for whole epochs, else a fifth
    of the training images; 0: none);
    frameworks: 'auto', 'none', 'torch', 'jax' or 'torch,jax'; verbose: 0,
    1 (Keras's bar, redrawn during the epoch where `log` is print and the
    output a terminal or Jupyter) or 2 (Keras's verbose=2 line); precision:
    'float32' (strict, every row), 'tf32' (the GPU rows, ours and the
    frameworks', with TF32 tensor cores allowed), 'bf16' or 'fp16' (our GPU
    rows' products in 16 bits, PyTorch's under autocast; see the module
    docstring);
    script: also time fit as the seed script calls it, per engine (rows
    with ``"kind": "script"``, after the others)."""
    p = _plan(models, engines, batch_size, images, epochs, seed, torch_threads, torch_gpu,
              threads, steps, data, val_images, frameworks, download, verbose, plot_path,
              precision, script)
    return _execute(p, log, json_path, plot_path, command)


def _execute(p, log, json_path, plot_path, command):
    env = environment()
    for line in format_environment(env):
        log(line)
    p.torch_variants = _torch_variants(p, log)
    p.jax = _jax_wanted(p, log)
    rows, script_rows = [], []
    cache = {}
    for model in p.models:
        for batch in p.batches or [SEEDS[model]["batch_size"]]:
            data = bench_data(model, p.steps * batch if p.steps else p.images, p.val_images,
                              p.data, p.seed, p.download, cache=cache)
            log("")
            log("== %s, batch %d: %s training images, %s validation (%s%s)"
                % (model, batch, format(len(data.x), ","), format(len(data.x_val), ","),
                   data.label, "; " + data.note if data.note else ""))
            for device in p.engines:
                if p.verbose:
                    log("-- %s on %s" % (model, device))
                rows.append(time_row(lambda: EngineRunner(model, device, data, batch, p.seed,
                                                          precision=p.precision),
                                     model, batch, data, p.epochs, log, p.verbose))
                gc.collect()
            rows += _framework_rows(p, model, batch, data, log)
            if p.script:
                script_rows += _script_rows(p, model, batch, data, log)
            data = None  # the arrays go before the next batch size's
            gc.collect()
    add_speedups(rows)
    log("")
    for line in format_table(rows):
        log(line)
    if script_rows:
        from .script import format_script_rows
        log("")
        log("fit as the seed script calls it (float64 input, validation every epoch, bar on):")
        for line in format_script_rows(script_rows, rows):
            log(line)
    if json_path:
        write_json(json_path, rows + script_rows, env, command)
        log("rows written to %s" % json_path)
    if plot_path:
        from .plot import speedup_plot
        folder = os.path.dirname(os.path.abspath(plot_path))
        os.makedirs(folder, exist_ok=True)
        speedup_plot(rows, plot_path, environment=env)
        log("plot written to %s" % plot_path)
    return rows


def _counts(text):
    """'1,2,4' -> [1, 2, 4]: counts, each >= 1."""
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("expected counts >= 1 such as 1,2,4, got %r" % text)
    return counts


def _parser():
    p = argparse.ArgumentParser(prog="python -m cnncuda.bench",
                                description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", action="append", choices=sorted(SEEDS),
                   help="seed network (repeatable; default cifar10_cnn)")
    p.add_argument("--device", action="append",
                   help="engine: numpy, cpu, omp, omp:N, cuda, cudnn, or all (repeatable; "
                        "default every engine of this machine but numpy)")
    p.add_argument("--batch-size", type=_counts, action="append", default=[],
                   help="batch size, or a list such as 32,512 (repeatable; default the seed's)")
    p.add_argument("--images", type=int, default=None,
                   help="training images per epoch (default: the whole training set; with "
                        "real data, its first N images)")
    p.add_argument("--steps", type=int, default=None,
                   help="steps per epoch instead of --images (images = steps x batch)")
    p.add_argument("--epochs", type=int, default=1, help="epochs timed; the best is reported")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", choices=DATA_MODES, default="auto",
                   help="auto: the real data set when it is on this machine, else synthetic")
    p.add_argument("--download", action="store_true",
                   help="download a real data set that is not here (never done otherwise)")
    p.add_argument("--val-images", type=int, default=None,
                   help="validation images after each epoch, not timed (default: the whole test "
                        "split for whole epochs, else a fifth of --images; 0: none)")
    p.add_argument("--threads", type=_counts, action="append", default=[],
                   help="also time the omp engine at these thread counts, e.g. 1,2,4,8,16 "
                        "(repeatable); without --device the other engines are numpy and cpu")
    p.add_argument("--frameworks", default="auto",
                   help="auto (torch and jax where installed), none, torch, jax or torch,jax")
    p.add_argument("--torch-threads", type=_counts, action="append", default=[],
                   help="also time PyTorch on the CPU with this many threads, or with each of "
                        "a list such as 1,2,4,8,16 (repeatable; skipped without torch)")
    p.add_argument("--torch-gpu", action="store_true",
                   help="also time PyTorch on the GPU, eager and with the step in a CUDA graph")
    p.add_argument("--precision", choices=PRECISIONS, default="float32",
                   help="float32 (default): strict float32 everywhere; tf32: the GPU rows "
                        "(cuda, cudnn, PyTorch's and JAX's) with TF32 tensor cores allowed; "
                        "bf16, fp16: our GPU rows with 16-bit tensor-core products and "
                        "PyTorch's GPU rows under autocast (JAX's stay float32)")
    p.add_argument("--script", action="store_true",
                   help="also time one fit call per engine as the seed script makes it "
                        "(float64 input, validation every epoch, bar on), --epochs epochs")
    p.add_argument("--profile", metavar="PNG", nargs="?", const="",
                   help="instead of timing epochs: profile a training step per layer on each "
                        "engine (tables; with PNG, a stacked-bar plot there; --json: the rows, "
                        "which python -m cnncuda.profile ROWS.json PNG plots later)")
    p.add_argument("--verbose", type=int, default=1, choices=(0, 1, 2),
                   help="progress: 0 none, 1 Keras's bar (redrawn during the epoch in a "
                        "terminal), 2 Keras's verbose=2 line")
    p.add_argument("--json", help="write the environment and the rows to this file")
    p.add_argument("--plot", help="write the speedup plot to this PNG file (needs matplotlib)")
    return p


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    flat = lambda lists: [t for counts in lists for t in counts]  # noqa: E731
    command = "python -m cnncuda.bench " + " ".join(sys.argv[1:] if argv is None else argv)
    try:
        plan = _plan(args.model or ["cifar10_cnn"], args.device, flat(args.batch_size) or None,
                     args.images, args.epochs, args.seed, flat(args.torch_threads),
                     args.torch_gpu, flat(args.threads), args.steps, args.data, args.val_images,
                     args.frameworks, args.download, args.verbose, args.plot, args.precision,
                     args.script)
    except (TypeError, ValueError, ImportError, EngineUnavailableError,
            DatasetNotFoundError) as err:
        parser.error(str(err))
    if args.profile is not None:
        from .profile import run_profiles
        run_profiles(plan, print, args.profile, args.json)
        return 0
    _execute(plan, print, args.json, args.plot, command.strip())
    return 0

"""The CUDA kernels' optimisation stages, for notebook 05.

Three sources, in this order:

- ``dev/cuda/stages.json``: per-kernel versions timed by the kernel-stage
  harness (dev/cuda/run_all.sh), a list of ``{"op", "version", "name",
  "ms"}`` (the median milliseconds of version `version` of op `op`), per
  seed shape (``"shape"``) and summed over them (``"shape": "total"``, the
  rows shown where there are any);
- ``docs/figures/stages_h200.json``: the same, as measured on an H200 and
  committed (so that a machine without a GPU shows a real measurement);
- the staged history of the ``cuda`` engine recorded in BENCHMARKS.md (the
  table under "How the `cuda` engine got there": seconds per CIFAR-10 epoch
  after each stage, on the GPU named there).

Both become bars (group, label, value, unit) that bench_plot.stages_plot draws.
"""
import json
import numbers
import os
import re

__all__ = ["find_repository_file", "read_stages_json", "recorded_engine_stages",
           "load_stages", "STAGES_JSON", "BENCHMARKS"]

STAGES_JSON = os.path.join("dev", "cuda", "stages.json")
MEASURED_STAGES_JSON = os.path.join("docs", "figures", "stages_h200.json")
BENCHMARKS = "BENCHMARKS.md"
_TABLE_TITLE = "How the `cuda` engine got there"


def find_repository_file(relpath, start=None):
    """The path of `relpath` in the cnncuda repository -- looked for from
    `start` (default: the working directory) up through its parents, then
    beside the installed package (an in-place or editable install) -- or None."""
    folder = os.path.abspath(start or os.getcwd())
    candidates = []
    while True:
        candidates.append(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    candidates.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    for folder in candidates:
        path = os.path.join(folder, relpath)
        if os.path.isfile(path):
            return path
    return None


_FIELDS = (  # (key, required, types, what is expected)
    ("op", True, str, "a string"),
    ("version", True, (int, str), "an int or a string"),
    ("name", True, str, "a string"),
    ("ms", True, (numbers.Real, type(None)), "a number or null"),
    ("shape", False, str, "a string"),
    ("ok", False, bool, "true or false"),
    ("max_err", False, (numbers.Real, type(None)), "a number or null"),
    ("device", False, str, "a string"),
)


def read_stages_json(path):
    """The harness's entries, checked: a list of {"op": str, "version": int or
    str, "name": str, "ms": number > 0, or null where the version's checks
    failed}, each optionally with "shape" (a seed shape, or "total" for the
    sum over them), "ok", "max_err" and "device"."""
    with open(path) as f:
        try:
            entries = json.load(f)
        except json.JSONDecodeError as err:
            raise ValueError("%s: not JSON (%s)" % (path, err)) from None
    if not isinstance(entries, list) or not entries:
        raise ValueError("%s: expected a non-empty list of {op, version, name, ms}, got %s"
                         % (path, type(entries).__name__ if entries else "an empty list"))
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            raise ValueError("%s[%d]: expected an object, got %r" % (path, i, e))
        for key, required, types, expected in _FIELDS:
            if key not in e:
                if required:
                    raise ValueError("%s[%d]: missing key %r" % (path, i, key))
                continue
            if not isinstance(e[key], types) or (isinstance(e[key], bool) and types is not bool):
                raise ValueError("%s[%d].%s: expected %s, got %r"
                                 % (path, i, key, expected, e[key]))
        if e["ms"] is not None and not e["ms"] > 0:
            raise ValueError("%s[%d].ms: expected a number > 0 or null, got %r"
                             % (path, i, e["ms"]))
    return entries


def _kernel_bars(entries):
    """(bars, notes) of the harness's entries: per op, its "total" rows where
    there are any (one time per version), else one group per seed shape;
    versions in order; versions without a time, or whose checks failed, left
    out and named in the notes."""
    bars, notes = [], []
    for op in dict.fromkeys(e["op"] for e in entries):
        mine = [e for e in entries if e["op"] == op]
        totals = [e for e in mine if e.get("shape") == "total"]
        if totals:
            groups = {"%s (total over the seed shapes)" % op: totals}
        else:
            groups = {}
            for e in mine:
                groups.setdefault("%s: %s" % (op, e["shape"]) if e.get("shape") else op,
                                  []).append(e)
        for group, rows in groups.items():
            if all(isinstance(e["version"], int) for e in rows):
                rows = sorted(rows, key=lambda e: e["version"])
            for e in rows:
                label = "v%s %s" % (e["version"], _short(e["name"]))
                if e["ms"] is None or e.get("ok") is False:
                    notes.append("%s %s: left out (%s)" % (group, label, "no time"
                                                            if e["ms"] is None else
                                                            "its checks failed"))
                    continue
                bars.append({"group": group, "label": label, "value": float(e["ms"]),
                             "unit": "ms"})
    devices = sorted({e["device"] for e in entries if e.get("device")})
    if devices:
        notes.insert(0, "measured on %s" % ", ".join(devices))
    return bars, notes


def recorded_engine_stages(path):
    """The staged epoch times of the cuda engine from BENCHMARKS.md at `path`:
    a list of {"stage": int, "name": str, "batch": int, "seconds": float}
    (stages without a figure at a batch size are left out)."""
    with open(path) as f:
        lines = f.read().splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if _TABLE_TITLE in line)
        header_at = next(i for i in range(start, len(lines)) if lines[i].startswith("| stage |"))
    except StopIteration:
        raise ValueError("%s: no table of stages under %r" % (path, _TABLE_TITLE)) from None
    headers = [c.strip() for c in lines[header_at].strip("|").split("|")]
    batches = [int(m.group(1)) if m else None
               for m in (re.search(r"batch (\d+)", h) for h in headers)]
    stages = []
    for line in lines[header_at + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        number, _, name = cells[0].partition(". ")
        if not number.isdigit():
            raise ValueError("%s: a stage row without its number: %r" % (path, line))
        for batch, cell in zip(batches[1:], cells[1:]):
            value = cell.replace("*", "").strip()
            if batch is not None and value:
                stages.append({"stage": int(number), "name": name, "batch": batch,
                               "seconds": float(value)})
    if not stages:
        raise ValueError("%s: the table of stages holds no figures" % path)
    return stages


def _short(text, width=30):
    text = text.split(":")[0]
    return text if len(text) <= width else text[:width - 1].rstrip() + "..."


def load_stages(stages_json=None, benchmarks=None):
    """(what, bars, source, notes): `what` says which data are shown ('kernel
    versions' or 'engine stages'), `bars` a list of {"group", "label",
    "value", "unit"} (each group's first bar is its baseline), `source` the
    file read, `notes` what was left out and where it was measured. The
    harness's JSON is used when given or found at dev/cuda/stages.json, else
    the committed H200 measurement, else BENCHMARKS.md's history."""
    path = (stages_json or find_repository_file(STAGES_JSON)
            or find_repository_file(MEASURED_STAGES_JSON))
    if path is not None:
        if not os.path.isfile(path):
            raise ValueError("stages_json: expected a file, got %r" % (path,))
        bars, notes = _kernel_bars(read_stages_json(path))
        if not bars:
            raise ValueError("%s: no version has a time (%s)" % (path, "; ".join(notes)))
        return "kernel versions", bars, path, notes
    path = benchmarks or find_repository_file(BENCHMARKS)
    if path is None:
        raise ValueError("benchmarks: neither %s nor %s was found (run from the repository)"
                         % (STAGES_JSON, BENCHMARKS))
    bars = [{"group": "cuda engine, CIFAR-10 CNN, batch %d" % s["batch"],
             "label": "%d. %s" % (s["stage"], _short(s["name"])),
             "value": s["seconds"], "unit": "s per epoch"}
            for s in recorded_engine_stages(path)]
    return "engine stages", bars, path, ["measured on an H200 (BENCHMARKS.md)"]

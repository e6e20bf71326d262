"""The bench's table: speedups over the sequential ``cpu`` engine (and over
PyTorch on the CPU at the same thread count), and the printed columns."""

__all__ = ["add_speedups", "format_table", "group_key", "data_label"]


def group_key(row):
    """Rows compared with each other: same model, batch size and data. (Not
    the image count: a CUDA-graph row trains only the epoch's full batches,
    49,984 of 50,000 images, and is still the same experiment; speedups are
    ratios of images per second.)"""
    return (row["model"], row["batch_size"], row.get("dataset", row["data"]))


def _rate(row):
    return row.get("images_per_second") or row["images"] / row["seconds_per_epoch"]


def data_label(row):
    """'real: cifar10' or 'synthetic'."""
    if row["data"] == "real":
        return "real: %s" % row.get("dataset", "?")
    return "synthetic"


def _torch_threads_of(device):
    """The PyTorch CPU row an engine's row is compared with: 'cpu' -> 1,
    'omp:N' -> N, others None."""
    if device == "cpu":
        return 1
    if device.startswith("omp:"):
        return int(device[4:])
    return None


def add_speedups(rows):
    """Sets ``speedup_vs_cpu`` (this row's images per second over the cpu
    row's: its seconds per epoch over ours for epochs of the same size; None
    without a cpu row to compare with) and, where PyTorch ran on the CPU with
    the same thread count, ``speedup_vs_torch`` (> 1: faster than PyTorch)."""
    for r in rows:
        same = [b for b in rows if group_key(b) == group_key(r)]
        base = next((b for b in same if b["device"] == "cpu"), None)
        r["speedup_vs_cpu"] = _rate(r) / _rate(base) if base else None
        threads = _torch_threads_of(r["device"])
        torch = next((b for b in same if b["device"] == "torch-cpu:%s" % threads), None)
        if torch is not None:
            r["speedup_vs_torch"] = _rate(r) / _rate(torch)
    return rows


def _mib(value):
    return "%.0f" % (value / 2**20) if value is not None else ""


def _memory_kind(row):
    kind = row.get("peak_memory_kind") or ""
    return "device" if kind.startswith("device") else ("host" if kind else "")


def _fmt(value, pattern):
    return pattern % value if value is not None else ""


COLUMNS = (
    # (header, alignment, cell)
    ("model", "<", lambda r: r["model"]),
    ("engine", "<", lambda r: r["device"]),
    ("batch", ">", lambda r: str(r["batch_size"])),
    ("images", ">", lambda r: str(r["images"])),
    ("data", "<", data_label),
    ("s/epoch", ">", lambda r: "%.3f" % r["seconds_per_epoch"]),
    ("images/s", ">", lambda r: "%.1f" % r["images_per_second"]),
    ("ms/step", ">", lambda r: "%.2f" % r["ms_per_step"]),
    ("speedup", ">", lambda r: _fmt(r.get("speedup_vs_cpu"), "%.2fx")),
    ("vs torch", ">", lambda r: _fmt(r.get("speedup_vs_torch"), "%.2fx")),
    ("accuracy", ">", lambda r: _fmt(r.get("final_accuracy"), "%.4f")),
    ("val acc", ">", lambda r: _fmt(r.get("val_accuracy"), "%.4f")),
    ("peak MiB", ">", lambda r: _mib(r.get("peak_memory_bytes"))),
    ("memory", "<", _memory_kind),
    ("J/epoch", ">", lambda r: _fmt(r.get("joules_per_epoch"), "%.1f")),
    ("timer", "<", lambda r: r.get("timer", "")),
)


def format_table(rows):
    """The table's lines (call add_speedups first), then a legend."""
    cells = [[cell(r) for _, _, cell in COLUMNS] for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, (h, _, _) in enumerate(COLUMNS)]

    def line(values):
        return "  ".join(("%-*s" if align == "<" else "%*s") % (w, v)
                         for (_, align, _), w, v in zip(COLUMNS, widths, values)).rstrip()

    lines = [line([h for h, _, _ in COLUMNS])]
    lines += [line(c) for c in cells]
    lines.append("speedup: over the sequential cpu engine on the same data; vs torch: PyTorch "
                 "on the CPU with as many threads over this row (> 1: faster); peak memory: host "
                 "resident (the process) or device; J/epoch: the GPU's energy counter (NVML)")
    notes = sorted({"%s on %s: %s" % (r["model"], r["device"], n)
                    for r in rows for n in r.get("notes", ())})
    notes += sorted({"%s: synthetic data (%s)" % (r["model"], r["data_note"])
                     for r in rows if r["data"] == "synthetic" and r.get("data_note")})
    if any(r.get("precision") == "tf32" for r in rows):
        lines.append("tf32: TF32 tensor cores allowed (inputs of products rounded to a 10-bit "
                     "mantissa, sums in float32); rows without it are strict float32")
    if any(r.get("precision") in ("bf16", "fp16") for r in rows):
        lines.append("bf16, fp16: products on 16-bit tensor cores (inputs rounded to bfloat16 "
                     "or float16, sums in float32; ours store float32, PyTorch's rows run under "
                     "autocast without loss scaling); rows without it are strict float32")
    lines += ["note: " + n for n in notes]
    return lines

"""The kernels of one training step as ncu timed them, a line each: the CSV
that `ncu --csv --metrics gpu__time_duration.sum,launch__grid_size,...`
writes over tools/ncu_steps.py (two unrecorded steps), read back.

    python3 tools/ncu_table.py steps.csv

Prints every launch of the second half of the run (ncu_steps.py runs two
steps: the second, with the first's one-time choices made), in launch order:
its index, name (without arguments or namespaces), grid, registers a thread
where measured, and microseconds; then their sum. ncu serialises the
launches, so the sum is above a recorded step's time (which overlaps them).
"""
import csv
import re
import sys


def launches(path):
    """[(name, {metric: value})] in launch order."""
    rows, header = {}, None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if row and row[0] == "ID":
                header = row
                continue
            if header is None or len(row) != len(header):
                continue
            r = dict(zip(header, row))
            entry = rows.setdefault(int(r["ID"]), [r["Kernel Name"], {}])
            entry[1][r["Metric Name"]] = r["Metric Value"].replace(",", "")
    return [rows[k] for k in sorted(rows)]


def short(name):
    """The kernel's name without its namespaces, return type and arguments."""
    name = name.replace("(anonymous namespace)", "<unnamed>")
    name = re.sub(r"[\w:]*<unnamed>::", "", name)   # namespaces up to the anonymous one
    name = re.sub(r"\(.*", "", name)                # the arguments
    return re.sub(r"^void ", "", name)


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: python3 tools/ncu_table.py steps.csv")
    runs = launches(argv[1])
    step = runs[len(runs) // 2:]
    total = 0.0
    for i, (name, m) in enumerate(step):
        us = float(m.get("gpu__time_duration.sum", "nan")) / 1000.0
        total += us
        regs = m.get("launch__registers_per_thread", "")
        grid = m.get("launch__grid_size", "")
        print("%3d  %-58.58s %8s %4s %8.1f" % (i, short(name), grid, regs, us))
    print("%d launches, %.1f us" % (len(step), total))


if __name__ == "__main__":
    main(sys.argv)

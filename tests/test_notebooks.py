"""Every notebook's code runs top to bottom (with its parameters cell shrunk)."""
import glob
import json
import os

import pytest

NOTEBOOKS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "..", "notebooks", "*.ipynb")))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=os.path.basename)
def test_notebook_runs(path):
    with open(path) as f:
        nb = json.load(f)
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert cells and "".join(cells[0]["source"]).startswith("# Parameters")
    scope = {}
    for i, cell in enumerate(cells):
        source = "".join(cell["source"])
        exec(compile(source, "%s[cell %d]" % (os.path.basename(path), i), "exec"), scope)
        if i == 0:
            scope["STEPS"] = 2  # keep the run short

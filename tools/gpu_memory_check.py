"""Device memory across network lifetimes on the GPU engines.

    python3 tools/gpu_memory_check.py [lifetimes]

For each engine (cuda, cudnn) and with the recorded step on and off
(CNNCUDA_GRAPHS), builds a network, trains one resident-data epoch, deletes
it, `lifetimes` times, and prints the GPU's free memory before and after.
Exits 1 when free memory does not come back within 4 MiB. Run it alone and
under `compute-sanitizer --tool memcheck --leak-check full` to tell the
engine's leaks from a tool's bookkeeping.
"""
import gc
import os
import sys

import numpy as np

import cnncuda
from cnncuda.engine import make_net
from cnncuda.seeds import seed_network, synthetic_data

lifetimes = int(sys.argv[1]) if len(sys.argv) > 1 else 10
spec = seed_network("lenet5")
x, y = synthetic_data("lenet5", 256)


def lifetime(engine):
    net = make_net(engine, spec["layers"], spec["input_shape"], 32, spec["loss"],
                   spec["optimizer"])
    net.set_data(x, y)
    net.set_order(np.arange(256))
    net.train_range(0, 256, 32)
    net.read_sums()
    del net
    gc.collect()


status = 0
for engine in [e for e in ("cuda", "cudnn") if e in cnncuda.devices()]:
    for graphs in ("1", "0"):
        os.environ["CNNCUDA_GRAPHS"] = graphs
        lifetime(engine)  # one-time library setup
        start = cnncuda._C.cuda_memory()[0]
        for _ in range(lifetimes):
            lifetime(engine)
        end = cnncuda._C.cuda_memory()[0]
        lost = start - end
        print("%s CNNCUDA_GRAPHS=%s: %d lifetimes, free memory %d -> %d (%+d bytes)"
              % (engine, graphs, lifetimes, start, end, -lost), flush=True)
        if abs(lost) > 4 << 20:
            status = 1
sys.exit(status)

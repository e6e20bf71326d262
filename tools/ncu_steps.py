"""Two training steps of a seed network (CIFAR-10 CNN by default) on the cuda engine, for ncu to
time kernel by kernel (each launch with its grid, so the GEMM calls of each
layer can be told apart). Run the steps unrecorded, so ncu sees launches:

    CNNCUDA_GRAPHS=0 ncu --clock-control none \
        --metrics gpu__time_duration.sum,launch__grid_size --csv \
        python3 tools/ncu_steps.py [batch] [model] [precision]

precision: float32 (the default) or tf32.
"""
import sys

import numpy as np

from cnncuda.engine import make_net
from cnncuda.seeds import seed_network, synthetic_data

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 512
model = sys.argv[2] if len(sys.argv) > 2 else "cifar10_cnn"
precision = sys.argv[3] if len(sys.argv) > 3 else "float32"
s = seed_network(model)
net = make_net("cuda", s["layers"], s["input_shape"], batch, s["loss"], s["optimizer"],
               precision=precision)
x, y = synthetic_data(model, 2 * batch)
net.set_data(x, y)
net.set_order(np.arange(2 * batch))
net.train_range(0, 2 * batch, batch)
net.read_sums()

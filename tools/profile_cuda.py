"""Per-kernel GPU time of one training epoch chunk on an engine, through the
PyTorch profiler (CUPTI sees every kernel in the process, ours included).

    python3 tools/profile_cuda.py [engine] [batch] [images] [model] [precision]

model is a seed name (cnncuda.seeds.SEEDS), cifar10_cnn by default;
precision float32 (the default) or tf32.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from cnncuda.engine import make_net  # noqa: E402
from cnncuda.seeds import seed_network, synthetic_data  # noqa: E402

engine = sys.argv[1] if len(sys.argv) > 1 else "cuda"
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 32
images = int(sys.argv[3]) if len(sys.argv) > 3 else 3200
model = sys.argv[4] if len(sys.argv) > 4 else "cifar10_cnn"
precision = sys.argv[5] if len(sys.argv) > 5 else "float32"
s = seed_network(model)
net = make_net(engine, s["layers"], s["input_shape"], batch, s["loss"], s["optimizer"],
               precision=precision)
x, y = synthetic_data(model, images)
net.set_data(x, y)
net.set_order(np.arange(images))
net.train_range(0, images, batch)
net.read_sums()
with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
    net.train_range(0, images, batch)
    net.read_sums()
steps = (images + batch - 1) // batch
print("steps:", steps)
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=110))

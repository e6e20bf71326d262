"""How many threads pay for decoding JPEGs: 1024 JPEGs of Imagenette's size
(213x160) decoded and resized to 160x160 in batches of 32 on 1, 4, 8 and 16
threads, each image cast to float32 in its thread or the batch cast once.
Usage: python3 tools/decode_threads.py (BENCHMARKS.md has the H100
machine's figures; cnncuda/data/image_folder.py's MAX_DECODERS follows them)."""
import os, time, tempfile
import numpy as np
from concurrent.futures import ThreadPoolExecutor
from PIL import Image
rng = np.random.default_rng(0)
root = tempfile.mkdtemp()
files = []
for i in range(1024):
    f = os.path.join(root, "%d.jpg" % i)
    Image.fromarray((rng.random((160, 213, 3)) * 255).astype(np.uint8)).save(f, quality=90)
    files.append(f)
def dec(f, dtype):
    with Image.open(f) as im:
        im = im.convert("RGB").resize((160, 160), Image.BILINEAR)
        return np.asarray(im, dtype=dtype)
for threads in (1, 4, 8, 16):
    pool = ThreadPoolExecutor(threads)
    for mode in ("float", "uint8"):
        t = time.perf_counter()
        for at in range(0, len(files), 32):
            batch = files[at:at + 32]
            if mode == "float":
                x = np.stack(list(pool.map(lambda f: dec(f, np.float32), batch)))
            else:
                x = np.stack(list(pool.map(lambda f: dec(f, None), batch))).astype(np.float32)
        print("threads %2d %-6s %7.0f images/s" % (threads, mode, len(files) / (time.perf_counter() - t)))
    pool.shutdown()

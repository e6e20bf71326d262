"""How many threads pay for decoding JPEGs: 1024 JPEGs of Imagenette's size
(213x160) decoded and resized to 160x160 in batches of 32 on 1, 4, 8 and 16
threads, each image cast to float32 in its thread or the batch cast once.
Usage: python3 tools/decode_threads.py (BENCHMARKS.md has the H100
machine's figures; cnncuda/data/image_folder.py's MAX_DECODERS follows them)."""
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from PIL import Image


def write_images(root, count=1024):
    rng = np.random.default_rng(0)
    files = []
    for i in range(count):
        path = os.path.join(root, "%d.jpg" % i)
        pixels = (rng.random((160, 213, 3)) * 255).astype(np.uint8)
        Image.fromarray(pixels).save(path, quality=90)
        files.append(path)
    return files


def decode(path, dtype):
    with Image.open(path) as image:
        image = image.convert("RGB").resize((160, 160), Image.BILINEAR)
        return np.asarray(image, dtype=dtype)


def rate(files, pool, cast_per_image):
    start = time.perf_counter()
    for at in range(0, len(files), 32):
        batch = files[at:at + 32]
        if cast_per_image:
            np.stack(list(pool.map(lambda f: decode(f, np.float32), batch)))
        else:
            np.stack(list(pool.map(lambda f: decode(f, None), batch))).astype(np.float32)
    return len(files) / (time.perf_counter() - start)


def main():
    with tempfile.TemporaryDirectory() as root:
        files = write_images(root)
        for threads in (1, 4, 8, 16):
            with ThreadPoolExecutor(threads) as pool:
                for cast_per_image, name in ((True, "float"), (False, "uint8")):
                    print("threads %2d %-6s %7.0f images/s"
                          % (threads, name, rate(files, pool, cast_per_image)))


if __name__ == "__main__":
    main()

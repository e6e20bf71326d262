"""Reading a model file is bounded by what its header announces: the prefix
is checked first and the sizes against the file's size, so what is not a
model is refused after a few bytes (load_model('/dev/zero') read until
memory ran out; a 3 GB file took 29 s and 3 GB), a stream (a pipe) is read
no further than the model; and a header nested past Python's recursion
limit, anywhere, is a ModelFileError like any other forged header."""
import hashlib
import json
import os
import struct
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from cnncuda import saving
from cnncuda.keras import layers, models

LIMITED = r"""
import re, resource, sys, time
from cnncuda import saving
from cnncuda.keras import layers, models
# 1 GiB of address space beyond what the imports mapped (the CUDA libraries
# of a GPU build alone map about 1 GiB)
mapped = int(re.search(r"VmSize:\s+(\d+) kB", open("/proc/self/status").read()).group(1)) << 10
resource.setrlimit(resource.RLIMIT_AS, (mapped + (1 << 30), mapped + (1 << 30)))
began = time.perf_counter()
try:
    {call}(sys.argv[1])
    print("loaded")
except saving.ModelFileError as err:
    print("ModelFileError", time.perf_counter() - began, err)
except MemoryError:
    print("MemoryError")
"""


def in_limited_process(call, path):
    """Runs call(path) in a child with 1 GiB of address space beyond its
    imports'; its verdict.
    Not under AddressSanitizer (CI's sanitizer run preloads it): its shadow
    memory alone reserves terabytes of address space."""
    if "libasan" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("AddressSanitizer reserves more address space than the 1 GiB limit")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(LIMITED.format(call=call)),
                           str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def make(seed=0):
    model = models.Sequential([layers.Dense(3, input_shape=(4,))], seed=seed)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


@pytest.mark.parametrize("call", ["models.load_model", "make_model().load_weights"])
def test_dev_zero_is_refused_at_once(call):
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    if "make_model" in call:
        call = "(lambda p: models.Sequential([layers.Dense(3, input_shape=(4,))])" \
               ".load_weights(p))"
    verdict = in_limited_process(call, "/dev/zero")
    assert verdict.startswith("ModelFileError") and "not a cnncuda model file" in verdict, verdict


def sparse(path, prefix, size):
    with open(path, "wb") as f:
        f.write(prefix)
        f.truncate(size)


def test_a_large_file_that_is_not_a_model_is_refused_after_a_few_bytes(tmp_path):
    """3 GB (sparse: no disk used) of zeros, and 3 GB behind a model file's
    16-byte prefix whose header length is 4 GB: refused at once, in 1 GiB."""
    path = tmp_path / "big"
    sparse(path, b"", 3 << 30)
    verdict = in_limited_process("models.load_model", path)
    assert verdict.startswith("ModelFileError") and "not a cnncuda model file" in verdict, verdict
    assert float(verdict.split()[1]) < 5
    sparse(path, struct.pack("<8sII", saving.MAGIC, 2, 2**32 - 1), 3 << 30)
    verdict = in_limited_process("models.load_model", path)
    assert "truncated cnncuda model file: the header alone needs" in verdict, verdict


def test_a_model_followed_by_gigabytes_is_refused_before_its_body_is_read(tmp_path):
    """A real model file, then 3 GB: the header's sizes do not add up to the
    file's, which is refused before the weights are read."""
    path = tmp_path / "m"
    make().save(path)
    good = path.read_bytes()
    sparse(path, good, 3 << 30)
    verdict = in_limited_process("models.load_model", path)
    assert "corrupted cnncuda model file: expected %d bytes, found %d" % (len(good), 3 << 30) \
        in verdict, verdict


def through_a_pipe(tmp_path, data):
    """load_model on a FIFO that a thread fills with `data`."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    def feed():
        with open(fifo, "wb") as f:
            try:
                f.write(data)
            except BrokenPipeError:          # the reader stopped early, as it should
                pass
    writer = threading.Thread(target=feed)
    writer.start()
    try:
        return models.load_model(fifo)
    finally:
        writer.join(timeout=60)
        os.unlink(fifo)


def test_a_model_streamed_through_a_pipe_loads_and_extra_bytes_are_refused(tmp_path):
    model = make(1)
    model.save(tmp_path / "m")
    good = (tmp_path / "m").read_bytes()
    loaded = through_a_pipe(tmp_path, good)
    assert all(np.array_equal(a, b) for a, b in zip(loaded.get_weights(), model.get_weights()))
    with pytest.raises(saving.ModelFileError, match="corrupted cnncuda model file: expected"):
        through_a_pipe(tmp_path, good + b"x" * 100)
    with pytest.raises(saving.ModelFileError, match="truncated cnncuda model file"):
        through_a_pipe(tmp_path, good[:-40])


def forge_text(text, payload=b""):
    body = struct.pack("<8sII", saving.MAGIC, saving.FORMAT_VERSION, len(text)) + text + payload
    return body + hashlib.sha256(body).digest()


def nested(depth):
    return "[" * depth + "]" * depth


def test_a_header_nested_100000_levels_deep_is_a_model_file_error(tmp_path):
    """Before: RecursionError."""
    path = tmp_path / "m"
    for text in (nested(100_000), '{"weights": %s}' % nested(100_000)):
        path.write_bytes(forge_text(text.encode()))
        with pytest.raises(saving.ModelFileError, match="nested too deeply"):
            models.load_model(path)
        with pytest.raises(saving.ModelFileError, match="nested too deeply"):
            make().load_weights(path)


@pytest.mark.parametrize("where", ["layer config", "optimizer_state", "compile", "model name"])
def test_a_value_nested_just_below_the_parsers_limit_is_a_model_file_error(tmp_path, where):
    """Nesting the JSON parser takes (it stops near the recursion limit) may
    still be too deep for what reads the header next -- a repr in an error
    message, a comparison: a ModelFileError, never RecursionError."""
    model = make()
    model.fit(np.zeros((4, 4), np.float32), np.zeros(4), verbose=0)
    path = tmp_path / "m"
    model.save(path)
    header, weights, slots = saving.read_model_file(path)
    for depth in range(sys.getrecursionlimit(), 0, -10):     # the deepest the parser takes
        try:
            deep = json.loads(nested(depth))
            json.loads(json.dumps({"a": {"b": {"c": [{"d": {"e": deep}}]}}}))
            break
        except RecursionError:
            continue
    if where == "layer config":
        header["model"]["config"]["layers"][0]["config"]["units"] = deep
    elif where == "optimizer_state":
        header["optimizer_state"]["iterations"] = deep
    elif where == "compile":
        header["compile"]["optimizer"]["config"]["learning_rate"] = deep
    else:
        header["model"]["config"]["name"] = deep
    text = json.dumps(header).encode()           # json.dumps takes this depth
    flat = b"".join(np.ascontiguousarray(a, "<f4").tobytes()
                    for a in weights + [s for per in slots for s in per])
    path.write_bytes(forge_text(text, flat))
    try:
        models.load_model(path)
    except saving.ModelFileError:
        pass

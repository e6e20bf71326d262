"""Fuzzing model files (hypothesis): random bytes, and real files whose JSON
header has random parts replaced by random JSON values -- with the checksum
made good again, so that the reader has to judge the contents. load_model
either raises ModelFileError or gives a model that predicts; never another
exception, never a crash."""
import hashlib
import json
import struct

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from cnncuda import saving  # noqa: E402
from cnncuda.keras import layers, models  # noqa: E402
from fuzz_strategies import FUZZ, hang_guard  # noqa: E402,F401


def saved_file(tmp_dir):
    model = models.Sequential([
        layers.Conv2D(2, 3, padding="same", activation="relu", input_shape=(5, 5, 1)),
        layers.BatchNormalization(), layers.MaxPooling2D(), layers.Flatten(),
        layers.Dense(3, activation="softmax")], seed=1)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                  device="cpu")
    rng = np.random.default_rng(0)
    model.fit(rng.random((8, 5, 5, 1)), rng.integers(0, 3, 8), batch_size=4, verbose=0)
    path = tmp_dir / "model.cnncuda"
    model.save(path)
    return path.read_bytes()


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    data = saved_file(tmp_path_factory.mktemp("fuzz_files"))
    length = struct.unpack_from("<I", data, 12)[0]
    return json.loads(data[16:16 + length]), data[16 + length:-32]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=4),
    max_leaves=8)


def paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from paths(value, prefix + (i,))


def load(tmp_path, data):
    path = tmp_path / "m"
    path.write_bytes(data)
    try:
        model = models.load_model(path)
    except saving.ModelFileError as err:
        assert str(path) in str(err)
        event("refused")
        return None
    event("loaded")
    if model.built and model.layers:
        out = model.predict(np.zeros((2,) + model.input_shape[1:], np.float32), verbose=0)
        assert out.shape[0] == 2
    return model


@settings(max_examples=300, **FUZZ)
@given(data=st.binary(max_size=200))
def test_random_bytes(tmp_path_factory, data):
    tmp = tmp_path_factory.mktemp("bytes")
    assert load(tmp, data) is None
    assert load(tmp, saving.MAGIC + data) is None


@settings(max_examples=400, **FUZZ)
@given(choice=st.data())
def test_headers_with_random_parts(tmp_path_factory, original, choice):
    header, payload = json.loads(json.dumps(original[0])), original[1]
    for _ in range(choice.draw(st.integers(1, 3))):
        where = choice.draw(st.sampled_from(list(paths(header))[1:]))
        node = header
        for key in where[:-1]:
            node = node[key]
        if choice.draw(st.integers(0, 4)) == 0 and isinstance(node, dict):
            del node[where[-1]]
        else:
            node[where[-1]] = choice.draw(JSON)
    cut = choice.draw(st.sampled_from([0, 0, 0, 4, -4]))
    body_payload = payload[:len(payload) + cut] if cut < 0 else payload + b"\0" * cut
    text = json.dumps(header).encode()
    body = struct.pack("<8sII", saving.MAGIC, saving.FORMAT_VERSION, len(text)) + text \
        + body_payload
    load(tmp_path_factory.mktemp("headers"), body + hashlib.sha256(body).digest())

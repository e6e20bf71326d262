"""image_dataset_from_directory over a folder of PNG and JPEG files the test
writes: classes, splits, label and color modes, sizes; then fit on it."""
import os

import numpy as np
import pytest

import cnncuda as tf

Image = pytest.importorskip("PIL.Image")


@pytest.fixture
def folder(tmp_path):
    """3 classes (cat: 5 images, dog: 4, owl: 3) of 12x10 images whose red
    value is the class's index * 80, PNG and JPEG mixed, one subfolder."""
    rng = np.random.default_rng(0)
    for c, (name, count) in enumerate([("cat", 5), ("dog", 4), ("owl", 3)]):
        os.makedirs(tmp_path / name / "more")
        for i in range(count):
            pixels = np.zeros((12, 10, 3), np.uint8)
            pixels[..., 0] = c * 80
            pixels[..., 1] = rng.integers(0, 255)
            where = tmp_path / name / ("more" if i == 0 else "") / ("%d.%s" % (i, "png" if i % 2 else "jpg"))
            Image.fromarray(pixels).save(where)
    (tmp_path / "cat" / "notes.txt").write_text("not an image")
    return str(tmp_path)


def all_of(ds):
    xs, ys = zip(*list(ds))
    return np.concatenate(xs), np.concatenate(ys)


def test_classes_labels_and_shapes(folder, capsys):
    ds = tf.keras.utils.image_dataset_from_directory(folder, image_size=(6, 5), batch_size=5,
                                                     shuffle=False)
    assert "Found 12 files belonging to 3 classes." in capsys.readouterr().out
    assert ds.class_names == ["cat", "dog", "owl"] and len(ds) == 3
    x, y = all_of(ds)
    assert x.shape == (12, 6, 5, 3) and x.dtype == np.float32 and y.dtype == np.int32
    assert y.tolist() == [0] * 5 + [1] * 4 + [2] * 3
    # red is the class (JPEG moves it by a few levels at most)
    assert np.all(np.abs(x[..., 0].mean(axis=(1, 2)) - 80 * y) < 6)


def test_label_and_color_modes(folder):
    kw = dict(image_size=(4, 4), shuffle=False, verbose=False)
    x, y = all_of(tf.keras.utils.image_dataset_from_directory(folder, label_mode="categorical",
                                                              color_mode="grayscale", **kw))
    assert x.shape == (12, 4, 4, 1) and y.shape == (12, 3) and y.sum(axis=1).tolist() == [1] * 12
    only = tf.keras.utils.image_dataset_from_directory(folder, label_mode=None,
                                                       color_mode="rgba", **kw)
    assert next(iter(only)).shape == (12, 4, 4, 4)
    with pytest.raises(ValueError, match="'binary' needs exactly 2 classes, found 3"):
        tf.keras.utils.image_dataset_from_directory(folder, label_mode="binary", **kw)
    one = tf.keras.preprocessing.image_dataset_from_directory(folder, batch_size=None, **kw)
    first = next(iter(one))
    assert first[0].shape == (4, 4, 3) and first[1].shape == ()


def test_splits_are_disjoint_and_seeded(folder):
    kw = dict(image_size=(4, 4), validation_split=0.25, seed=3, verbose=False)
    train, val = tf.keras.utils.image_dataset_from_directory(folder, subset="both", **kw)
    assert len(train.file_paths) == 9 and len(val.file_paths) == 3
    assert not set(train.file_paths) & set(val.file_paths)
    again = tf.keras.utils.image_dataset_from_directory(folder, subset="validation", **kw)
    assert again.file_paths == val.file_paths
    with pytest.raises(ValueError, match="you must provide a `seed`"):
        tf.keras.utils.image_dataset_from_directory(folder, subset="training",
                                                    validation_split=0.2, verbose=False)
    with pytest.raises(ValueError, match="color_mode: expected"):
        tf.keras.utils.image_dataset_from_directory(folder, color_mode="cmyk")


def test_fit_on_a_folder(folder):
    ds = tf.keras.utils.image_dataset_from_directory(folder, image_size=(8, 8), batch_size=4,
                                                     seed=1, verbose=False)
    ds = ds.map(lambda x, y: (x / 255.0, y))
    model = tf.keras.Sequential([tf.keras.layers.InputLayer((8, 8, 3)), tf.keras.layers.Flatten(),
                                 tf.keras.layers.Dense(3)], seed=0)
    model.compile(optimizer="adam", metrics=["accuracy"],
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(ds.prefetch(tf.data.AUTOTUNE), epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2 and model.optimizer.iterations == 6


FORK_SCRIPT = """
import os, sys
import numpy as np
import cnncuda as tf

def images():
    ds = tf.keras.utils.image_dataset_from_directory(sys.argv[1], image_size=(6, 5), batch_size=4,
                                                     shuffle=False, verbose=False)
    return np.concatenate([x for x, _ in ds]).tobytes()

mine = images()                  # the decoding threads are up
pid = os.fork()
if pid == 0:
    os._exit(0 if images() == mine else 3)
_, status = os.waitpid(pid, 0)
print("child exit:", os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_decodes_with_threads_of_its_own(folder, tmp_path):
    """The decoding threads are the process's; a child forked after they
    started gets none of them running, and decodes on threads of its own."""
    import signal
    import subprocess
    import sys
    script = tmp_path / "fork.py"
    script.write_text(FORK_SCRIPT)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child = subprocess.Popen([sys.executable, str(script), folder], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True,
                             env=dict(os.environ, PYTHONPATH=root))
    try:
        out, err = child.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.communicate()
        pytest.fail("the forked child hung decoding (no answer in 120 s)")
    assert child.returncode == 0 and "child exit: 0" in out, (out, err[-3000:])

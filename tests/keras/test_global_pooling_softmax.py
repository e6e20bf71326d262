"""GlobalAveragePooling2D, GlobalMaxPooling2D (the engine's pooling with one
window the size of the image, then a Flatten unless keepdims) and the
Softmax layer: against NumPy on every engine, trained against the numpy
engine, and through Keras's own files in both directions."""
import numpy as np
import pytest

import cnncuda
from cnncuda import keras
from conftest import engine_params

RNG = np.random.default_rng(0)
X = (RNG.random((13, 7, 5, 3)) * 2 - 1).astype(np.float32)
Y = RNG.integers(0, 4, 13)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("cls, reduce", [(keras.layers.GlobalAveragePooling2D, np.mean),
                                         (keras.layers.GlobalMaxPooling2D, np.max)])
@pytest.mark.parametrize("engine", engine_params())
def test_global_pooling_is_the_reduction_over_the_image(engine, cls, reduce, keepdims):
    model = keras.Sequential([cls(keepdims=keepdims, input_shape=(7, 5, 3))])
    assert model.output_shape == ((None, 1, 1, 3) if keepdims else (None, 3))
    with cnncuda.device(engine):
        got = model.predict(X, verbose=0)
    np.testing.assert_allclose(got,
                               reduce(X, axis=(1, 2), keepdims=keepdims), rtol=1e-6, atol=1e-7)


def classifier(engine, pooling):
    model = keras.Sequential([keras.layers.Conv2D(6, 3, activation="relu", input_shape=(7, 5, 3)),
                              pooling(), keras.layers.Dense(4), keras.layers.Softmax()], seed=4)
    model.compile(optimizer=keras.optimizers.Adam(0.01), metrics=["accuracy"], device=engine,
                  loss="sparse_categorical_crossentropy")
    return model


@pytest.mark.parametrize("pooling", [keras.layers.GlobalAveragePooling2D,
                                     keras.layers.GlobalMaxPooling2D])
@pytest.mark.parametrize("engine", engine_params())
def test_a_classifier_trains_as_on_the_numpy_engine(engine, pooling):
    got, want = classifier(engine, pooling), classifier("numpy", pooling)
    h_got = got.fit(X, Y, batch_size=4, epochs=2, verbose=0).history
    h_want = want.fit(X, Y, batch_size=4, epochs=2, verbose=0).history
    np.testing.assert_allclose(h_got["loss"], h_want["loss"], rtol=1e-4)
    out = got.predict(X, verbose=0)
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(out, want.predict(X, verbose=0), rtol=1e-3, atol=1e-5)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match=r"expected ndim=4 \(batch, height, width, channels\), "
                                         r"found ndim=2"):
        keras.Sequential([keras.layers.GlobalAveragePooling2D(input_shape=(5,))])
    with pytest.raises(ValueError, match="data_format: expected None or 'channels_last'"):
        keras.layers.GlobalMaxPooling2D(data_format="channels_first")
    with pytest.raises(TypeError, match="keepdims"):
        keras.layers.GlobalMaxPooling2D(keepdims="yes")
    with pytest.raises(ValueError, match=r"axis: expected -1 or 1 \(the softmax runs over the "
                                         r"last axis of \(batch, features\) inputs\), got 2"):
        keras.layers.Softmax(axis=2)
    with pytest.raises(ValueError, match="softmax expects a \\(batch, features\\) input"):
        keras.Sequential([keras.layers.Softmax(input_shape=(7, 5, 3))])
    assert keras.layers.GlobalAvgPool2D is keras.layers.GlobalAveragePooling2D


@pytest.mark.parametrize("ext", [pytest.param(".keras", marks=pytest.mark.keras3),
                                 pytest.param(".h5", marks=pytest.mark.keras3), ".cnncuda"])
def test_saved_here_loads_here_and_in_keras(ext, tmp_path):
    if ext != ".cnncuda":
        pytest.importorskip("h5py")
    model = classifier("cpu", keras.layers.GlobalAveragePooling2D)
    model.fit(X, Y, epochs=1, verbose=0)
    path = str(tmp_path / ("m" + ext))
    model.save(path)
    back = keras.models.load_model(path)
    assert [type(l).__name__ for l in back.layers] == ["Conv2D", "GlobalAveragePooling2D",
                                                       "Dense", "Softmax"]
    np.testing.assert_array_equal(back.predict(X, verbose=0), model.predict(X, verbose=0))
    if ext == ".cnncuda":
        return
    from data.test_keras_files import run_keras
    np.save(tmp_path / "x.npy", X)
    run_keras("""
        import sys, numpy as np, keras
        model = keras.models.load_model(sys.argv[1])
        np.save(sys.argv[3], model.predict(np.load(sys.argv[2]), verbose=0))
    """, path, tmp_path / "x.npy", tmp_path / "theirs.npy")
    np.testing.assert_allclose(np.load(tmp_path / "theirs.npy"), model.predict(X, verbose=0),
                               rtol=0, atol=1e-6)


@pytest.mark.keras3
def test_a_model_keras_saves_loads_here(tmp_path):
    pytest.importorskip("h5py")
    from data.test_keras_files import run_keras
    np.save(tmp_path / "x.npy", X)
    path = str(tmp_path / "k.keras")
    run_keras("""
        import sys, numpy as np, keras
        x = np.load(sys.argv[2])
        model = keras.Sequential([keras.Input((7, 5, 3)), keras.layers.Conv2D(4, 3),
                                  keras.layers.GlobalMaxPooling2D(keepdims=True),
                                  keras.layers.Flatten(), keras.layers.Dense(3),
                                  keras.layers.Softmax()])
        model.save(sys.argv[1])
        np.save(sys.argv[3], model.predict(x, verbose=0))
    """, path, tmp_path / "x.npy", tmp_path / "theirs.npy")
    mine = keras.models.load_model(path)
    np.testing.assert_allclose(mine.predict(X, verbose=0), np.load(tmp_path / "theirs.npy"),
                               rtol=0, atol=1e-6)

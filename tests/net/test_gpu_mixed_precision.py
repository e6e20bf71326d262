"""Keras models under keras.mixed_precision's policies on the GPU engines:
'mixed_bfloat16' and 'mixed_float16' build the network in precision 'bf16' /
'fp16' (16-bit tensor-core products, float32 storage), and a small CNN's
training tracks the same model's in float32; under 'mixed_float16' with
dynamic loss scaling (compile's LossScaleOptimizer), run inside the engines'
recorded steps."""
import numpy as np
import pytest

import cnncuda as tf
from cnncuda.keras import layers, mixed_precision
from conftest import engine_params

GPU_ENGINES = engine_params(("cuda", "cudnn"))
# the float32 model's epoch losses against the mixed one's, relative
TRACK = {"mixed_bfloat16": 5e-2, "mixed_float16": 2e-2}


@pytest.fixture(autouse=True)
def float32_after():
    yield
    mixed_precision.set_global_policy("float32")


def small_cnn(policy, engine, seed=3):
    mixed_precision.set_global_policy(policy)
    tf.keras.utils.set_random_seed(seed)
    m = tf.keras.Sequential([
        layers.Input((16, 16, 3)),
        layers.Conv2D(32, 3, activation="relu"), layers.MaxPooling2D(),
        layers.Conv2D(64, 3, activation="relu"), layers.Flatten(),
        layers.Dense(64, activation="relu"), layers.Dense(10, dtype="float32")])
    m.compile(tf.keras.optimizers.Adam(1e-3),
              tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), device=engine)
    return m


def data(n=2048, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 16, 16, 3)).astype(np.float32)
    y = (x[:, :8, :8, 0].mean(axis=(1, 2)) > 0).astype(np.int64) + \
        2 * (x[:, 8:, 8:, 1].mean(axis=(1, 2)) > 0)
    return x, y


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_mixed_policy_training_tracks_float32(engine, policy):
    x, y = data()
    ref = small_cnn("float32", engine)
    mixed = small_cnn(policy, engine)
    mixed.set_weights(ref.get_weights())
    h_ref = ref.fit(x, y, batch_size=512, epochs=4, shuffle=False, verbose=0).history["loss"]
    h_mix = mixed.fit(x, y, batch_size=512, epochs=4, shuffle=False, verbose=0).history["loss"]
    assert mixed._net_precision == {"mixed_bfloat16": "bf16", "mixed_float16": "fp16"}[policy]
    assert ref._net_precision == "float32"
    np.testing.assert_allclose(h_mix, h_ref, rtol=TRACK[policy])
    assert h_mix[-1] < h_mix[0]                     # it learns
    assert all(w.dtype == np.float32 for w in mixed.get_weights())
    assert mixed.predict(x[:8], verbose=0).dtype == np.float32
    if policy == "mixed_float16":
        opt = mixed.optimizer
        assert type(opt).__name__ == "LossScaleOptimizer"
        # 16 steps, no growth (after 2000): each skipped one halved the scale
        assert opt.iterations >= 14
        assert opt.scale * 2.0 ** (16 - opt.iterations) == 2.0 ** 15


@pytest.mark.parametrize("engine", GPU_ENGINES)
def test_fp16_loss_scaling_skips_and_recovers_in_recorded_steps(engine):
    """An initial scale of 2^30 overflows float16's range (S times the
    gradient at the second convolution's output, a float16 operand of its
    products at batch 512 on the cuda engine's wide kernel): the first steps
    are skipped in the engine (a CUDA graph replays them) and the scale
    halves until the gradients fit, then training goes on. On cudnn the
    libraries choose whether to convert (no skip need happen there)."""
    from conftest import require_tensor_cores
    x, y = data()
    mixed_precision.set_global_policy("mixed_float16")
    m = small_cnn("mixed_float16", engine)
    m.compile(mixed_precision.LossScaleOptimizer(tf.keras.optimizers.Adam(1e-3),
                                                 initial_scale=2.0 ** 30,
                                                 dynamic_growth_steps=4),
              tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), device=engine)
    h = m.fit(x, y, batch_size=512, epochs=6, shuffle=False, verbose=0).history["loss"]
    opt = m.optimizer
    skipped = 24 - opt.iterations
    assert 0 <= skipped < 20
    assert np.log2(opt.scale) == int(np.log2(opt.scale))
    assert np.all(np.isfinite(h)) and h[-1] < h[0]
    assert all(np.all(np.isfinite(w)) for w in m.get_weights())
    if engine == "cuda":
        require_tensor_cores()
        assert skipped >= 1, "an operand of 2^30 times the gradient fit float16?"

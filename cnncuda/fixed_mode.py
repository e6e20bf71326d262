"""A layer called with ``training=False`` written in a subclassed model's
call (``self.drop(x, training=False)``, ``self.base(x, training=False)``)
or a block's: Keras runs that call in inference mode for good, in fit too.
symbolic.call_symbolic marks such a call's output while call is traced, and
the model keeps the ids of those layers (``model._inference_calls``); their
engine layers then take the inference form here:

- Dropout and SpatialDropout2D: rate 0, which passes x through in both
  modes (the layer keeps its place, so the random keys of the layers
  after it are those of the model without the fixed mode);
- the augmentation layers (but RandomCrop, refused when called): a rate-0
  dropout, x passed through, as their inference mode;
- BatchNormalization: the inference-mode normalization of a frozen layer
  (moving statistics, not updated), where the layer is frozen
  (``trainable=False``, the transfer-learning pattern ``base.trainable =
  False; base(x, training=False)``). A trainable one would train gamma and
  beta through the inference-mode normalization, which no engine op
  computes: training is refused naming the layer (check_training); predict
  and evaluate run it in inference mode anyway.

A fixed ``training=True`` there (Monte-Carlo dropout in predict) is refused
when the layer is called (symbolic.py). In a functional graph Keras 3 gives
every layer the model call's own mode (fit's True, predict's False) over
the graph's ``training=``, so there the layer follows the engine's mode.
"""

__all__ = ["inference_form", "check_training"]

_AUGMENTATIONS = ("random_flip", "random_rotation", "random_zoom", "random_translation",
                  "random_contrast")


def inference_form(dicts):
    """Engine layer dicts as they run for a call with training=False (a
    trainable BatchNormalization's stay: check_training refuses to train
    it; inference runs it in inference mode anyway)."""
    out = []
    for d in dicts:
        d = dict(d)
        kind = d.get("kind")
        if kind in ("dropout", "spatial_dropout2d"):
            d["rate"] = 0.0
        elif kind in _AUGMENTATIONS:
            d = dict({"kind": "dropout", "rate": 0.0},
                     **({"inputs": d["inputs"]} if "inputs" in d else {}))
        out.append(d)
    return out


def check_training(model):
    """Refuses to train `model` (fit's steps, a training-mode forward)
    where a trainable BatchNormalization is called with training=False."""
    from .models import _all_models
    from .symbolic import _mode_layers
    for inner in _all_models(model):
        for layer in inner._layers:
            if id(layer) not in inner._inference_calls:
                continue
            for leaf in _mode_layers(layer):
                if type(leaf).__name__ == "BatchNormalization" and leaf.trainable:
                    raise ValueError(
                        'layer "%s" (BatchNormalization) is called with training=False and is '
                        "trainable: Keras 3 then trains its gamma and beta through the "
                        "normalization by the moving statistics, which the engines cannot "
                        "compute (they run that normalization for a frozen layer only); "
                        "freeze it (layer.trainable = False, or the model it is in) to train, "
                        "or call it without training=" % leaf.name)

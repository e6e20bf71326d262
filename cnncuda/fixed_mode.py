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
- BatchNormalization: the inference-mode normalization in training too
  (moving statistics, not updated): a frozen one (``trainable=False``, the
  transfer-learning pattern ``base.trainable = False; self.base(x,
  training=False)``) as it already runs; a trainable one with the engine
  layer's ``inference`` flag, which trains gamma and beta through that
  normalization (cnn_layer_spec.inference: batchnorm_infer_stats, then
  batchnorm_backward's dgamma and dbeta, batchnorm_backward_infer's dx).

A fixed ``training=True`` there (Monte-Carlo dropout in predict) is refused
when the layer is called (symbolic.py). In a functional graph Keras 3 gives
every layer the model call's own mode (fit's True, predict's False) over
the graph's ``training=``, so there the layer follows the engine's mode.
"""

__all__ = ["inference_form"]

_AUGMENTATIONS = ("random_flip", "random_rotation", "random_zoom", "random_translation",
                  "random_contrast")


def inference_form(dicts):
    """Engine layer dicts as they run for a call with training=False."""
    out = []
    for d in dicts:
        d = dict(d)
        kind = d.get("kind")
        if kind in ("dropout", "spatial_dropout2d"):
            d["rate"] = 0.0
        elif kind in _AUGMENTATIONS:
            d = dict({"kind": "dropout", "rate": 0.0},
                     **({"inputs": d["inputs"]} if "inputs" in d else {}))
        elif kind == "batchnorm" and d.get("trainable", True):
            d["inference"] = True
        out.append(d)
    return out

"""``cnncuda.distribute``: data-parallel training over several GPUs (NCCL) or
CPU engines, in Keras's manner::

    strategy = cnncuda.distribute.MirroredStrategy(devices=[0, 1])
    with strategy.scope():
        model = cnncuda.models.Sequential([...])
        model.compile(optimizer="adam", loss=..., metrics=["accuracy"])
    model.fit(x, y, batch_size=1024, epochs=5)      # 512 per GPU

and, one process per GPU under a launcher (torchrun, or
``python -m cnncuda.distribute.launch --nproc 4 train.py``), on one host or
several::

    strategy = cnncuda.distribute.MultiWorkerMirroredStrategy()

The batch size given to fit is the global batch: each step splits it over
the replicas. See strategy.py for the arguments and csrc/comm.h for how the
gradients are summed.
"""
from .replicas import GroupFailedError, ReplicaGroup
from .strategy import (MirroredStrategy, MultiWorkerMirroredStrategy, get_strategy,
                       has_strategy)

__all__ = ["MirroredStrategy", "MultiWorkerMirroredStrategy", "get_strategy", "has_strategy",
           "ReplicaGroup", "GroupFailedError"]

"""``keras.utils.Sequence`` and ``keras.utils.PyDataset``: a dataset as a
Python object of ``len(seq)`` batches, ``seq[i]`` the i-th (x, y) batch, and
``on_epoch_end()`` called after each epoch (to reshuffle, say). fit,
evaluate and predict take one as x."""

__all__ = ["PyDataset", "Sequence"]


class PyDataset:
    """Subclass and define ``__len__`` (the number of batches) and
    ``__getitem__(index)`` (batch `index`: (x, y), (x, y, sample_weight) or
    x). workers, use_multiprocessing and max_queue_size are accepted as
    Keras takes them; batches are read in the calling thread."""

    def __init__(self, workers=1, use_multiprocessing=False, max_queue_size=10):
        self.workers = workers
        self.use_multiprocessing = use_multiprocessing
        self.max_queue_size = max_queue_size

    def __len__(self):
        raise NotImplementedError("a PyDataset subclass defines __len__ (its number of batches)")

    def __getitem__(self, index):
        raise NotImplementedError("a PyDataset subclass defines __getitem__(index) (one batch)")

    def on_epoch_end(self):
        """Called after every epoch of fit (and at the end of evaluate and predict)."""

    @property
    def num_batches(self):
        return len(self)


class Sequence(PyDataset):
    """TensorFlow 2's name for PyDataset."""

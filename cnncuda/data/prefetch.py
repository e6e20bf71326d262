"""One producer thread that runs a stream's passes ahead of the engine.

fit, evaluate and predict over a stream (feed.py) ask a Producer for one
pass at a time: ``Producer.items(make)`` calls ``make()`` on the producer's
thread, iterates what it returns there and hands the items to the caller
through a queue of `depth` items (2: while the engine works on one block,
the next one is ready and a third is being decoded). The caller's thread
never touches the iterator, so a Python generator (not thread-safe) is
consumed from one thread only, the producer's, for the whole fit.

Passes run one after the other in the order they are asked for, each only
when its caller starts reading it, so the producer never runs ahead into
the next epoch (a PyDataset's on_epoch_end runs between two passes, as it
does without the producer).

What the pass raises (StopIteration aside) comes out of the caller's
``next`` after the items made before it, where the same loop without a
producer would have raised it, with the producer's traceback. A pass the
caller leaves early (a break, an exception, KeyboardInterrupt) is stopped
after the item being made; the iterator is closed on the producer's thread.
``close()`` ends the thread and waits for it: after it returns, nothing
touches the stream any more.

The engine calls release the GIL (csrc/py/net_type.c, net_call), so the
producer decodes while the engine trains. The producer never calls the
model: a stream that calls the model it feeds gets exclusive.py's
RuntimeError, which says so.
"""
import queue
import threading

from ..exclusive import FEED_THREAD

__all__ = ["Producer"]

_POLL = 0.05          # seconds between the producer's checks for a stopped pass


class _Pass:
    def __init__(self, make, depth):
        self.make = make
        self.out = queue.Queue(maxsize=depth)
        self.stop = threading.Event()
        self.done = threading.Event()       # the producer has left this pass


class Producer:
    """A thread running passes over iterables; ``items(make)`` yields one
    pass's items on the caller's thread. Use as a context manager, or call
    close()."""

    def __init__(self, depth=2, name=FEED_THREAD):
        self.depth = depth
        self._tasks = queue.Queue()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    # -- the producer's thread

    def _work(self):
        while True:
            task = self._tasks.get()
            if task is None:
                return
            try:
                self._run(task)
            finally:
                task.done.set()

    def _put(self, task, message):
        """False when the caller stopped the pass."""
        while not task.stop.is_set():
            try:
                task.out.put(message, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, task):
        iterator = None
        try:
            iterator = iter(task.make())
            while not task.stop.is_set():
                try:
                    item = next(iterator)
                except StopIteration:
                    self._put(task, ("end", None))
                    return
                if not self._put(task, ("item", item)):
                    return
                item = None
        except BaseException as error:         # the caller raises it where it belongs
            self._put(task, ("error", error))
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    pass

    # -- the caller's thread

    def items(self, make):
        """The items of iter(make()), made on the producer's thread."""
        if self._thread is None:
            raise RuntimeError("this Producer was closed")
        task = _Pass(make, self.depth)
        self._tasks.put(task)
        try:
            while True:
                kind, value = task.out.get()
                if kind == "item":
                    yield value
                elif kind == "end":
                    return
                else:
                    try:
                        raise value
                    finally:
                        value = None
        finally:
            task.stop.set()
            _drain(task.out)
            task.done.wait()
            _drain(task.out)        # what the producer put meanwhile

    def close(self):
        """Ends the thread once its pass is over; nothing touches a stream after it."""
        if self._thread is None:
            return
        self._tasks.put(None)
        self._thread.join()
        self._thread = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _drain(out):
    while True:
        try:
            out.get_nowait()
        except queue.Empty:
            return

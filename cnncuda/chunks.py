"""How many training steps each engine call runs, in the loops that cut an
epoch into calls so that a progress bar can redraw between them (fit's,
evaluate's, predict's and the bench's)."""

__all__ = ["StepChunker", "RateChunker"]


class StepChunker:
    """Steps per engine call, grown or shrunk so that a call takes about
    `seconds`: ``next(done)`` is the next call's step count, ``took(elapsed,
    steps)`` what that call took. The caller says which clock: host time
    (on GPU engines launches are asynchronous, so growth stops where the
    engine's queue pushes back) or the engine's own time for the call.
    `single`: one step per call (a callback wants every batch)."""

    def __init__(self, seconds, total, single=False):
        self.seconds, self.total, self.size, self.single = seconds, total, 1, single

    def next(self, done):
        return 1 if self.single else min(self.size, self.total - done)

    def took(self, elapsed, steps):
        if self.single:
            return
        if elapsed < self.seconds / 2 and steps >= self.size:
            self.size = min(self.size * 2, max(1, self.total))
        elif elapsed > self.seconds * 2 and self.size > 1:
            self.size = max(1, self.size // 2)


class RateChunker:
    """A StepChunker that also ends each call where the learning rate of a
    schedule may change: the engines take the rate from the host between
    calls (docs/semantics.md, "Learning-rate schedules"). `optimizer`'s
    ``constant_rate_steps()`` says how many steps from its next one keep
    the rate (None: no schedule, the chunker's count stands)."""

    def __init__(self, chunker, optimizer):
        self.chunker, self.optimizer = chunker, optimizer

    def next(self, done):
        count = self.chunker.next(done)
        constant = self.optimizer.constant_rate_steps() if self.optimizer is not None else None
        return count if constant is None else max(1, min(count, constant))

    def took(self, elapsed, steps):
        self.chunker.took(elapsed, steps)

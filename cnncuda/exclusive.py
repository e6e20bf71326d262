"""One call at a time on a model.

A model's calls (fit, evaluate, predict, the weights, compile, save, ...)
build, replace and drive one engine network. Two threads inside them at once
would each build their own network and the last assignment would win (one
fit's updates lost), or one would read a network the other had just
dropped. So a call made while another thread is inside a call on the same
model raises RuntimeError at once and changes nothing, as a Net does
(docs/reliability.md). The same thread may nest calls -- a callback of fit
may predict, save or fit again.
"""
import functools
import threading

__all__ = ["exclusive"]

_OWNERS = threading.Lock()      # guards every model's _call_owner
FEED_THREAD = "cnncuda-feed"    # the thread that reads a stream (data/prefetch.py)


def _enter(model, what):
    me = threading.get_ident()
    with _OWNERS:
        owner = model.__dict__.get("_call_owner")
        if owner is None:
            model._call_owner = [me, what, 1]
        elif owner[0] == me:
            owner[2] += 1
        elif threading.current_thread().name == FEED_THREAD:
            raise RuntimeError('model "%s": %s() was called by the stream that %s() reads; fit, '
                               "evaluate and predict read a dataset or generator on a thread of "
                               "their own while the model trains, so the stream must not call "
                               "the model it feeds (use a copy of the model)"
                               % (getattr(model, "name", "?"), what, owner[1]))
        else:
            raise RuntimeError('model "%s": %s() was called while %s() runs on another thread; '
                               "calls on one model must not overlap (use one model per thread, "
                               "or a lock)" % (getattr(model, "name", "?"), what, owner[1]))


def _leave(model):
    with _OWNERS:
        owner = model._call_owner
        owner[2] -= 1
        if owner[2] == 0:
            model._call_owner = None


def exclusive(method, what=None):
    """Decorates a model method: the call raises RuntimeError while another
    thread is inside an exclusive call on the same model. `what` names the
    call in that message (the method's name by default)."""
    what = what or method.__name__

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        _enter(self, what)
        try:
            return method(self, *args, **kwargs)
        finally:
            _leave(self)
    return call

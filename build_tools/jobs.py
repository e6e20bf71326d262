"""How many compilers setup.py runs at once, and running them.

``MAX_JOBS`` (the variable pip users know from PyTorch's extension builds)
caps the count; without it, one compiler per CPU this process may run on
(``taskset -c 0,1`` gives 2, however many the machine has).
"""
import os
import threading
from concurrent.futures import ThreadPoolExecutor

VARIABLE = "MAX_JOBS"


def job_count(environ):
    """MAX_JOBS from ``environ`` when set, else the CPUs this process may use.
    Raises ValueError naming the variable for anything but a positive integer."""
    value = environ.get(VARIABLE, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError("%s: expected a positive whole number of compilers run at once "
                             "(e.g. %s=2), got %r" % (VARIABLE, VARIABLE, environ[VARIABLE]))
        return int(value)
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class JobFailed(RuntimeError):
    """A compile failed; the message names the source and holds its output."""


def run_all(tasks, jobs, log=print):
    """Runs ``tasks`` -- (name, weight, fn) triples, fn() returning the text
    to print -- on ``jobs`` threads, heaviest first, so that the longest
    compiles do not start last. When one fails, no further task starts; those
    running are waited for, then JobFailed is raised for the first failure."""
    failed = []
    lock = threading.Lock()

    def one(name, fn):
        with lock:
            if failed:
                return
        try:
            text = fn()
        except Exception as e:  # raised once every running task is done
            with lock:
                failed.append((name, e))
            return
        if text:
            with lock:
                log(text.rstrip("\n"))

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for name, _, fn in sorted(tasks, key=lambda t: -t[1]):
            pool.submit(one, name, fn)
    if failed:
        name, e = failed[0]
        raise JobFailed("compiling %s failed: %s" % (name, e)) from e

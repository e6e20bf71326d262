"""Keras 3 (JAX on the CPU) in child processes, for the tests that compare
with it (conftest.run_keras).

Each script runs in a process of its own, as `python -c SCRIPT ARGS` would
run it, but not started from nothing: one Python per test session imports
Keras and JAX once (some 2.5 s on a 2-core machine, paid by every child
before) and forks a child per script. The fork is taken only while JAX has
no backend yet (no XLA client, no thread: JAX's own warning about forking
applies once it has one), which holds after the imports; where it does not,
or where the platform cannot fork, every script starts its own Python as
before. The child gets the caller's environment and working folder, sys.argv
as `python -c` sets it, its stdout and stderr in files the caller reads,
and exits with the script's status (an exception's traceback on stderr and
1, SystemExit's code)."""
import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

# The zygote: imports, says whether it can fork, then serves one request a
# line ({"code", "args", "env", "cwd", "stdout", "stderr"}) by forking: it
# answers the child's pid, then its exit status.
ZYGOTE = r'''
import io, json, os, sys, traceback
import keras, jax
from jax._src import xla_bridge
answer = sys.stdout.buffer
usable = hasattr(os, "fork") and not xla_bridge._backends
answer.write(b"ready\n" if usable else b"unusable\n")
answer.flush()
if not usable:
    sys.exit(0)
requests = sys.stdin.buffer
while True:
    line = requests.readline()
    if not line:
        break
    r = json.loads(line)
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            out = os.open(r["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            err = os.open(r["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(out, 1)
            os.dup2(err, 2)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
            os.environ.clear()
            os.environ.update(r["env"])
            os.chdir(r["cwd"])
            sys.argv = ["-c"] + r["args"]
            status = 0
            try:
                exec(compile(r["code"], "<string>", "exec"), {"__name__": "__main__"})
            except SystemExit as e:
                if e.code is None:
                    status = 0
                elif isinstance(e.code, int):
                    status = e.code
                else:
                    print(e.code, file=sys.stderr)
                    status = 1
            except BaseException:
                traceback.print_exc()
                status = 1
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(status)
    answer.write(b"%d\n" % pid)
    answer.flush()
    answer.write(b"%d\n" % os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    answer.flush()
'''

_zygote = None   # the session's zygote: a Popen, or False where it cannot serve
_pending = bytearray()  # what it answered past the last line read


def keras_env():
    """The environment Keras runs in: this one, JAX as its backend, on the CPU."""
    return dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")


def _start():
    global _zygote
    if _zygote is None:
        _zygote = False
        if hasattr(os, "fork"):
            p = subprocess.Popen([sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, env=keras_env(), bufsize=0)
            if _line(p, 300) == b"ready":
                _zygote = p
                atexit.register(_stop)
            else:
                p.wait()
    return _zygote


def _stop():
    global _zygote
    if _zygote:
        _zygote.stdin.close()
        try:
            _zygote.wait(timeout=30)
        except subprocess.TimeoutExpired:
            _zygote.kill()
    _zygote = False


def _line(p, timeout):
    """The zygote's next answer line (without its newline), or None after
    `timeout` seconds or at its end. Read from the pipe itself, a chunk at a
    time: a buffered readline could take two answers at once and leave the
    second where select does not see it."""
    deadline = time.monotonic() + timeout
    while b"\n" not in _pending:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([p.stdout], [], [], left)[0]:
            return None
        chunk = os.read(p.stdout.fileno(), 4096)
        if not chunk:
            return None
        _pending.extend(chunk)
    line, _, rest = bytes(_pending).partition(b"\n")
    _pending[:] = rest
    return line


def _fresh(code, args, timeout):
    out = subprocess.run([sys.executable, "-c", code] + list(args), env=keras_env(),
                         capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout, out.stderr


def run(code, args, timeout=300):
    """(returncode, stdout, stderr) of `code` run as `python -c code args`
    would run it, with Keras's environment (keras_env). A zygote that stops
    answering (killed, out of memory) is dropped: this script and the rest
    start their own Pythons."""
    global _zygote
    z = _start()
    if not z:
        return _fresh(code, args, timeout)
    with tempfile.TemporaryDirectory() as d:
        files = {"stdout": os.path.join(d, "out"), "stderr": os.path.join(d, "err")}
        request = dict(files, code=code, args=list(args), env=keras_env(), cwd=os.getcwd())
        try:
            z.stdin.write(json.dumps(request).encode() + b"\n")
            pid = _line(z, 60)
        except OSError:
            pid = None
        if pid is None:
            z.kill()
            _zygote = False
            return _fresh(code, args, timeout)
        status = _line(z, timeout)
        if status is None:  # the child hangs: killed, and the zygote answers for it
            os.kill(int(pid), signal.SIGKILL)
            _line(z, 60)
            raise subprocess.TimeoutExpired([sys.executable, "-c", "..."], timeout)
        with open(files["stdout"]) as f, open(files["stderr"]) as g:
            return int(status), f.read(), g.read()

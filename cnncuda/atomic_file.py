"""Writing a file atomically, with the rights and the kind of file a plain
``open(path, "wb")`` would respect.

The bytes go to a temporary file in the target's folder, which is flushed to
disk and renamed over the target: a crash, a full disk or Ctrl-C leaves the
previous file whole (and no temporary file, except after SIGKILL). Before
anything is written:

- a symbolic link is followed: the file it names is replaced, the link stays
  (a dangling link's target is created);
- a target that is not a regular file is refused (a directory with
  IsADirectoryError, a device, FIFO or socket with ValueError): renaming
  over /dev/null would replace the device;
- a target the caller may not write is refused with PermissionError, as
  open() would refuse it (the kernel answers: mode bits, ACLs, a read-only
  filesystem; root may write a write-protected file, as with open());
- a new file gets the mode open() gives it (0666 less the umask); a
  replaced file keeps its mode, and its owner where the caller may set it;
- the temporary name ``.NAME.XXXXXXXX.tmp`` is cut to the folder's limit
  on name lengths, so that any valid name can be written.

A replaced file that has other hard links is replaced under this name only
(open() would write through to every link).
"""
import errno
import os
import secrets
import stat

__all__ = ["write_atomically", "create_temporary"]

_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def _check_target(path, target, arg):
    """os.stat of the existing target (None if there is none), after the
    checks above."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "%s: is a directory" % arg, path)
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        raise ValueError("%s: expected a regular file to write, got %s (%s)" % (arg, path, kind))
    # opening for writing without truncating changes nothing, and the
    # kernel gives the answer open(path, "wb") would get
    fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    os.close(fd)
    return st


def create_temporary(folder, name, suffix=".tmp"):
    """(fd, path) of a new file ``.NAME.XXXXXXXX.tmp`` in folder, created with
    mode 0666 (the umask applies, as for open()), its name cut to the
    folder's limit on name lengths."""
    try:
        limit = os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    stem = name.encode("utf-8", "surrogateescape")[:max(1, limit - 10 - len(suffix))]
    stem = stem.decode("utf-8", "ignore")
    for _ in range(100):
        tmp = os.path.join(folder, ".%s.%s%s" % (stem, secrets.token_hex(4), suffix))
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", folder)


def write_atomically(path, chunks, arg="filepath"):
    """Writes the bytes objects of `chunks` to `path` (str or PathLike) as
    described above; `arg` names the argument in error messages."""
    path = os.fspath(path)
    target = os.path.realpath(path)
    old = _check_target(path, target, arg)
    folder, name = os.path.split(target)
    fd, tmp = create_temporary(folder, name)
    try:
        if old is not None:
            os.fchmod(fd, stat.S_IMODE(old.st_mode))
            try:
                os.fchown(fd, old.st_uid, old.st_gid)
            except PermissionError:
                pass            # not the caller's to give: the file becomes the caller's
        with os.fdopen(fd, "wb") as f:
            fd = None
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        if fd is not None:
            os.close(fd)
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise

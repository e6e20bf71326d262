"""Where data sets are kept, and how a missing file is fetched.

Files live in ``~/.cnncuda/datasets`` (``$CNNCUDA_DATA`` overrides). A file
already in Keras's cache (``~/.keras/datasets``, or ``$KERAS_HOME/datasets``)
is used where it is. A missing file is downloaded from the origin Keras uses,
to a temporary name, checked against its published SHA-256 (MD5 where that is
all the publisher gives), and only then renamed into place. Without network
access the error names the URL and the folder to put a manual download in.
"""
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request

from .. import switches
from ..atomic_file import create_temporary

__all__ = ["DatasetNotFoundError", "data_dir", "keras_dir", "file_digest", "fetch", "find_local",
           "extract_tar"]


class DatasetNotFoundError(FileNotFoundError):
    """A data set that is not on this machine and could not be downloaded."""


def data_dir():
    """cnncuda's data folder: $CNNCUDA_DATA, else ~/.cnncuda/datasets."""
    return switches.data_dir()


def keras_dir():
    """Keras's data folder: $KERAS_HOME/datasets, else ~/.keras/datasets."""
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    return os.path.join(home, "datasets")


def file_digest(path, algorithm="sha256"):
    """The hex digest of a file."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _matches(path, sha256, md5):
    if sha256:
        return file_digest(path, "sha256") == sha256
    if md5:
        return file_digest(path, "md5") == md5
    return True


def find_local(fname, sha256=None, md5=None, subdir="", keras_names=None):
    """The path of data file `fname` where it is on this machine, or None
    (never downloads): in cnncuda's folder (``subdir`` of it), else in Keras's
    folder (under `keras_names`, default [fname], in the same subdir). Local
    copies whose checksum does not match are not used."""
    target = os.path.join(data_dir(), subdir, fname)
    if os.path.isfile(target) and _matches(target, sha256, md5):
        return target
    for name in keras_names or [fname]:
        candidate = os.path.join(keras_dir(), subdir, name)
        if os.path.isfile(candidate) and _matches(candidate, sha256, md5):
            return candidate
    return None


def fetch(fname, origin, what, sha256=None, md5=None, subdir="", keras_names=None):
    """The path of data file `fname`: the local copy ``find_local`` finds,
    else downloaded from `origin` into cnncuda's folder (``subdir`` of it)."""
    local = find_local(fname, sha256, md5, subdir, keras_names)
    if local is not None:
        return local
    target = os.path.join(data_dir(), subdir, fname)
    _download(origin, target, what, sha256, md5)
    return target


def _download(origin, target, what, sha256, md5):
    folder = os.path.dirname(target)
    manual = ("Without network access, download %s elsewhere and put it in %s/ (or set "
              "CNNCUDA_DATA to the folder that holds it); Keras's copy in %s/ is used too."
              % (origin, folder, keras_dir()))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as err:
        raise DatasetNotFoundError("%s: cannot create %s (%s). %s" % (what, folder, err, manual)) \
            from None
    algorithm, expected = ("sha256", sha256) if sha256 else ("md5", md5)
    digest = hashlib.new(algorithm)
    # (not tempfile.mkstemp: its file is 0600 whatever the umask)
    fd, tmp = create_temporary(folder, os.path.basename(target), suffix=".part")
    try:
        sys.stdout.write("Downloading data from %s\n" % origin)
        sys.stdout.flush()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(origin, timeout=60) as response:
            for block in iter(lambda: response.read(1 << 20), b""):
                digest.update(block)
                out.write(block)
    except (urllib.error.URLError, OSError, ValueError) as err:
        _remove(tmp)
        reason = getattr(err, "reason", None) or err
        raise DatasetNotFoundError("%s: could not download %s (%s). %s"
                                   % (what, origin, reason, manual)) from None
    except BaseException:
        _remove(tmp)
        raise
    if expected and digest.hexdigest() != expected:
        _remove(tmp)
        raise ValueError("%s: the file downloaded from %s has %s %s, expected %s; it was "
                         "discarded" % (what, origin, algorithm, digest.hexdigest(), expected))
    os.replace(tmp, target)


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def extract_tar(archive, folder, top, what):
    """Extracts the tree `top` of a tar archive into `folder`/`top`, through a
    temporary folder renamed into place; refuses members outside `top`, links
    and device files."""
    os.makedirs(folder, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".%s." % top, dir=folder)
    try:
        with tarfile.open(archive) as tar:
            members = []
            for member in tar.getmembers():
                name = os.path.normpath(member.name)
                if (os.path.isabs(name) or name.startswith("..") or member.issym()
                        or member.islnk() or member.isdev()):
                    raise ValueError("%s: %s holds an unsafe member %r"
                                     % (what, archive, member.name))
                if name == top or name.startswith(top + os.sep):
                    members.append(member)
            if hasattr(tarfile, "data_filter"):
                tar.extractall(staging, members=members, filter="data")
            else:  # Python < 3.11.4: the members were checked above
                tar.extractall(staging, members=members)
        if not os.path.isdir(os.path.join(staging, top)):
            raise ValueError("%s: %s does not hold the folder %s" % (what, archive, top))
        destination = os.path.join(folder, top)
        if os.path.isdir(destination):
            shutil.rmtree(destination)
        os.replace(os.path.join(staging, top), destination)
        return destination
    except tarfile.TarError as err:
        raise ValueError("%s: %s is not a readable tar archive (%s)" % (what, archive, err)) \
            from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)

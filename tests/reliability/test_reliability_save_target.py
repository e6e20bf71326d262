"""What save writes to: the atomic write (a temporary file renamed over the
target) respects what open(path, "wb") would -- as Keras's save does --
without losing its guarantee that a failed save leaves the previous file
whole: a symbolic link is written through, what is not a regular file is
refused, a file the caller may not write is refused, a new file gets the
umask's mode, a replaced one keeps its mode, and any valid name works."""
import os
import shutil
import stat
import subprocess

import pytest

from cnncuda import atomic_file
from cnncuda.keras import layers, models
from conftest import same_arrays as same


def make(seed=0):
    model = models.Sequential([layers.Dense(3, input_shape=(4,))], seed=seed)
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    return model


def weights_in(path):
    return models.load_model(path).get_weights()


def test_a_symbolic_link_is_written_through(tmp_path):
    """Before, the link became a regular file and its target was left stale."""
    target, link = tmp_path / "real.cnn", tmp_path / "link.cnn"
    make(1).save(target)
    link.symlink_to("real.cnn")
    model = make(2)
    model.save(link)
    assert link.is_symlink() and os.readlink(link) == "real.cnn"
    assert same(weights_in(target), model.get_weights())
    dangling = tmp_path / "dangling.cnn"
    dangling.symlink_to("sub/created.cnn")
    (tmp_path / "sub").mkdir()
    model.save_weights(dangling)
    assert dangling.is_symlink() and (tmp_path / "sub" / "created.cnn").is_file()
    assert sorted(os.listdir(tmp_path)) == ["dangling.cnn", "link.cnn", "real.cnn", "sub"]


def special_files(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    found = {"FIFO": fifo}
    if os.geteuid() == 0:          # only root may make a device node
        device = tmp_path / "null"
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        found["character device"] = device
    return found


def test_what_is_not_a_regular_file_is_refused(tmp_path):
    """Before, a FIFO or a character device (as root, /dev/null itself) was
    replaced by a regular file."""
    model = make()
    for kind, path in special_files(tmp_path).items():
        mode = os.lstat(path).st_mode
        with pytest.raises(ValueError, match="filepath: expected a regular file to write, got "
                                             ".*(%s)" % kind):
            model.save(path)
        with pytest.raises(ValueError, match="expected a regular file"):
            model.save_weights(path)
        assert os.lstat(path).st_mode == mode
    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(IsADirectoryError):
        model.save(folder)
    assert folder.is_dir() and not os.listdir(folder)
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]


def test_a_file_the_caller_may_not_write_is_refused(tmp_path):
    """As open() would refuse it: a 0444 file for a user; for root (who may
    write a 0444 file, with open() too) an immutable file (chattr +i)."""
    path = tmp_path / "protected.cnn"
    make(1).save(path)
    before = path.read_bytes()
    if os.geteuid() != 0:
        path.chmod(0o444)
        undo = lambda: path.chmod(0o644)       # noqa: E731
    else:
        if shutil.which("chattr") is None or subprocess.run(
                ["chattr", "+i", str(path)], capture_output=True).returncode != 0:
            pytest.skip("running as root, where a write-protected file is writable, and "
                        "chattr +i is not available here")
        undo = lambda: subprocess.run(["chattr", "-i", str(path)], check=True)   # noqa: E731
    try:
        with pytest.raises(PermissionError):
            make(2).save(path)
        with pytest.raises(PermissionError):
            make(2).save_weights(path)
    finally:
        undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["protected.cnn"], "a temporary file was left"


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_mode_of_the_umask(tmp_path, umask, mode):
    """Before, every file was 0600 (the temporary file's)."""
    old = os.umask(umask)
    try:
        make().save(tmp_path / "m")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "m").st_mode) == mode


def test_a_replaced_file_keeps_its_mode(tmp_path):
    path = tmp_path / "m"
    make(1).save(path)
    path.chmod(0o640)
    make(2).save(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_names_up_to_the_systems_limit_are_written(tmp_path):
    """A 248-byte name failed with 'File name too long' (the temporary
    name was longer); now any name the folder takes."""
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    model = make()
    for length in (248, limit):
        path = tmp_path / ("m" * length)
        model.save(path)
        assert same(weights_in(path), model.get_weights())
        model.save(path)                   # replaced too
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
    with pytest.raises(OSError, match="File name too long"):
        model.save(tmp_path / ("m" * (limit + 1)))


def test_the_temporary_name_is_cut_to_the_limit(tmp_path):
    fd, tmp = atomic_file.create_temporary(str(tmp_path), "é" * 200)
    os.close(fd)
    name = os.path.basename(tmp)
    assert name.startswith(".é") and name.endswith(".tmp")
    assert len(name.encode()) <= os.pathconf(tmp_path, "PC_NAME_MAX")

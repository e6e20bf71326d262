"""The cnncuda model file: one file holding a model's architecture, weights,
compile settings and optimizer state (docs/model-file-format.md).

Layout (integers little-endian)::

    offset 0   8 bytes   magic b"CNNCUDA\\0"
    offset 8   uint32    format version (2; version 1 files are still read)
    offset 12  uint32    header length H in bytes
    offset 16  H bytes   header: UTF-8 JSON (see the format doc)
    16 + H     P bytes   the weights, float32 little-endian, C order, one after
                         another in the order of header["weights"]
    16+H+P     S bytes   the optimizer's slots (Adam's m and v, SGD's
                         velocity), float32 the same way, in the order of
                         header["optimizer_state"]["slots"] (version 2 only;
                         none without an optimizer state)
    ...        32 bytes  SHA-256 of every byte before it

A file is written to a temporary file in the same folder and renamed over
the target, so a crash never leaves half a model under the name
(cnncuda/atomic_file.py: links followed, only regular files replaced, the
caller's rights and umask respected). Reading checks the magic, the
version, the header, the sizes it announces against the file's size and
then the checksum before it trusts anything, reading no more than the
header announces, and raises ModelFileError saying which failed.
"""
import hashlib
import io
import json
import math
import os
import stat
import struct

import numpy as np

from .atomic_file import write_atomically

__all__ = ["MAGIC", "FORMAT_VERSION", "READ_VERSIONS", "ModelFileError", "write_model_file",
           "model_file_bytes", "read_model_file", "read_model_bytes"]

MAGIC = b"CNNCUDA\x00"
FORMAT_VERSION = 2
READ_VERSIONS = (1, 2)
_PREFIX = struct.Struct("<8sII")
_DIGEST = 32
_PIECE = 16 << 20       # bytes per read


class ModelFileError(ValueError):
    """A model file that is not one, is truncated, corrupted or of another version."""


def write_model_file(path, header, weights, slots=None):
    """Writes `header` (a JSON-able dict; its "weights" entries get their
    shapes from `weights`), the float32 `weights` and, when given, the
    optimizer's `slots` (a list per trainable weight of its arrays; their
    shapes go to header["optimizer_state"]["slots"], which then must be a
    dict) to `path` atomically."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("filepath: expected a file name, got %r" % (path,))
    write_atomically(os.fspath(path), model_file_bytes(header, weights, slots))


def model_file_bytes(header, weights, slots=None):
    """The bytes of the model file write_model_file writes, as a list of
    two bytes objects (the body, then its SHA-256)."""
    arrays = [np.ascontiguousarray(w, dtype="<f4") for w in weights]
    header = dict(header)
    entries = header.get("weights") or [{} for _ in arrays]
    header["weights"] = [dict(entry, shape=list(a.shape)) for entry, a in zip(entries, arrays)]
    if slots is not None:
        slots = [[np.ascontiguousarray(a, dtype="<f4") for a in entry] for entry in slots]
        header["optimizer_state"] = dict(header["optimizer_state"],
                                         slots=[[list(a.shape) for a in entry] for entry in slots])
        arrays += [a for entry in slots for a in entry]
    text = json.dumps(header, sort_keys=True).encode("utf-8")
    body = _PREFIX.pack(MAGIC, FORMAT_VERSION, len(text)) + text + b"".join(a.tobytes() for a in arrays)
    return [body, hashlib.sha256(body).digest()]


class _Source:
    """Reads a model file in bounded pieces, hashing what it reads: `size`
    is the file's size where it is a regular file (the header's sizes are
    checked against it before the body is read), else None (a pipe or a
    device: reads stop at what the header announces)."""

    def __init__(self, f, size):
        self.f, self.size, self.got = f, size, 0
        self.hash = hashlib.sha256()

    def read(self, count, hashed=True):
        """Up to `count` bytes (fewer at the end of the file)."""
        parts, left = [], count
        while left > 0:
            part = self.f.read(min(left, _PIECE))
            if not part:
                break
            parts.append(part)
            left -= len(part)
        data = b"".join(parts)
        self.got += len(data)
        if hashed:
            self.hash.update(data)
        return data

    def found(self):
        """The file's size, or for a stream what it gave (and one more byte
        if there is one)."""
        return self.size if self.size is not None else self.got + len(self.f.read(1))


def read_model_file(path):
    """(header, weights, slots) of a cnncuda model file (slots: per trainable
    weight a list of its optimizer arrays, as stored; [] for a version-1 file
    or one without an optimizer state); raises ModelFileError. The prefix is
    checked first, and the sizes its header announces against the file's
    size, so that what is not a model file is refused after reading a few
    bytes (load_model('/dev/zero') included)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("filepath: expected a file name, got %r" % (path,))
    path = os.fspath(path)
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        return _read(_Source(f, st.st_size if stat.S_ISREG(st.st_mode) else None), path)


def read_model_bytes(data, name="<bytes>"):
    """read_model_file on the bytes of a model file; `name` stands for the
    file name in error messages."""
    return _read(_Source(io.BytesIO(data), len(data)), name)


def _read(src, path):
    prefix = src.read(_PREFIX.size)
    if len(prefix) < _PREFIX.size:
        if MAGIC.startswith(prefix[:8]) and prefix:
            raise ModelFileError("%s: truncated cnncuda model file (%d bytes)" % (path, len(prefix)))
        raise ModelFileError("%s: not a cnncuda model file (%d bytes)" % (path, len(prefix)))
    magic, version, header_len = _PREFIX.unpack_from(prefix)
    if magic != MAGIC:
        hint = ""
        if prefix.startswith(b"\x89HDF"):
            hint = " (it is an HDF5 file, such as Keras's .h5; cnncuda reads only its own format)"
        elif prefix.startswith(b"PK"):
            hint = " (it is a zip file, such as Keras's .keras; cnncuda reads only its own format)"
        raise ModelFileError("%s: not a cnncuda model file%s" % (path, hint))
    if version not in READ_VERSIONS:
        raise ModelFileError("%s: cnncuda model file format version %d; this cnncuda reads "
                             "versions %s%s" % (path, version,
                                                " and ".join(str(v) for v in READ_VERSIONS),
                                                " (the file is newer: upgrade cnncuda)"
                                                if version > FORMAT_VERSION else ""))
    end_header = _PREFIX.size + header_len
    if src.size is not None and src.size < end_header + _DIGEST:
        raise ModelFileError("%s: truncated cnncuda model file: the header alone needs %d bytes, "
                             "the file has %d" % (path, end_header + _DIGEST, src.size))
    text = src.read(header_len)
    if len(text) < header_len:
        raise ModelFileError("%s: truncated cnncuda model file: the header alone needs %d bytes, "
                             "the file has %d" % (path, end_header + _DIGEST, src.got))
    try:
        header = json.loads(text.decode("utf-8"))
        shapes = [tuple(int(d) for d in entry["shape"]) for entry in header["weights"]]
        slot_shapes = []
        state = header.get("optimizer_state") if version >= 2 else None
        if state is not None:
            slot_shapes = [[tuple(int(d) for d in shape) for shape in entry]
                           for entry in state.get("slots", [])]
        if any(d < 0 for s in shapes + [s for e in slot_shapes for s in e] for d in s):
            raise ValueError("a negative dimension")
        if any(d >= 2**31 for s in shapes + [s for e in slot_shapes for s in e] for d in s):
            raise ValueError("a dimension of 2**31 or more")
    except RecursionError:
        raise ModelFileError("%s: corrupted cnncuda model file: unreadable header (nested too "
                             "deeply)" % path) from None
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError) as err:
        raise ModelFileError("%s: corrupted cnncuda model file: unreadable header (%s)"
                             % (path, err)) from None
    flat_slots = [s for entry in slot_shapes for s in entry]
    sizes = [math.prod(s) * 4 for s in shapes + flat_slots]     # Python ints: no overflow
    expected = end_header + sum(sizes) + _DIGEST
    if src.size is not None and src.size != expected:
        raise ModelFileError("%s: %s cnncuda model file: expected %d bytes, found %d"
                             % (path, "truncated" if src.size < expected else "corrupted",
                                expected, src.size))
    body = src.read(expected - end_header - _DIGEST)
    digest = src.read(_DIGEST, hashed=False)
    if len(body) + len(digest) < expected - end_header or src.size is None:
        found = src.found()
        if found != expected:
            raise ModelFileError("%s: %s cnncuda model file: expected %d bytes, found %d"
                                 % (path, "truncated" if found < expected else "corrupted",
                                    expected, found))
    if src.hash.digest() != digest:
        raise ModelFileError("%s: corrupted cnncuda model file: the SHA-256 checksum does not "
                             "match its contents" % path)
    arrays, at = [], 0
    for shape, size in zip(shapes + flat_slots, sizes):
        arrays.append(np.frombuffer(body, dtype="<f4", count=size // 4, offset=at)
                      .reshape(shape).astype(np.float32))
        at += size
    weights, rest = arrays[:len(shapes)], arrays[len(shapes):]
    slots = []
    for entry in slot_shapes:
        slots.append(rest[:len(entry)])
        rest = rest[len(entry):]
    return header, weights, slots

"""The object cache: each compiled object kept under a key of what made it,
so that a rebuild with nothing changed compiles nothing.

The key (sha256) of an object covers the source's path in the project and
its content; the content of every project header it can include (the
``#include`` lines followed from the source through its own folder and the
project's include folders, whether or not an ``#if`` keeps them); the exact
compile command less the source and output paths, with paths that change
from build to build (pip's temporary numpy) stood for by their content; and
``extra`` strings (the compiler's ``--version``, the library headers found).

Layout: ``<root>/<key[:2]>/<key>.o`` and ``<key>.sum`` (the object's sha256).
Each is written under a temporary name in the same folder and renamed, so a
build killed halfway leaves no entry; an entry whose object does not match
its .sum is deleted and compiled anew. Entries unused for 30 days are pruned.
"""
import hashlib
import os
import re
import shutil
import time

FORMAT = b"cnncuda-objcache-1"
MAX_AGE_S = 30 * 24 * 3600

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def reachable_headers(source, include_dirs):
    """The files ``source`` can include, directly or through others, found in
    the including file's folder (quoted names) or in ``include_dirs`` (the
    project's folders: system headers are not followed)."""
    seen = set()
    todo = [source]
    while todo:
        current = todo.pop()
        text = _read(current).decode("utf-8", "replace")
        for kind, name in _INCLUDE.findall(text):
            dirs = ([os.path.dirname(current)] if kind == '"' else []) + list(include_dirs)
            for d in dirs:
                path = os.path.normpath(os.path.join(d, name.strip()))
                if os.path.isfile(path):
                    if path not in seen:
                        seen.add(path)
                        todo.append(path)
                    break
    return sorted(seen)


def tree_digest(folder):
    """sha256 of the names and contents of every file under ``folder``."""
    h = hashlib.sha256()
    for base, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(base, name)
            h.update(os.path.relpath(path, folder).encode() + b"\0")
            h.update(hashlib.sha256(_read(path)).digest())
    return h.hexdigest()


def key_command(command, source, output, stand_ins=None):
    """``command`` as it enters a key: the source and output paths replaced by
    placeholders, and each path of ``stand_ins`` ({path: text}) by its text."""
    out = []
    for arg in command:
        if arg == source:
            arg = "<source>"
        elif arg == output:
            arg = "<output>"
        for path, text in (stand_ins or {}).items():
            arg = arg.replace(path, text)
        out.append(arg)
    return out


def object_key(source, command, headers, project_root, extra=()):
    """The key of the object compiled from ``source`` by ``command`` (already
    through key_command) with ``headers`` (reachable_headers) and ``extra``."""
    h = hashlib.sha256()

    def part(label, data):
        data = data.encode() if isinstance(data, str) else data
        h.update(b"%s %d:" % (label, len(data)) + data)

    part(b"format", FORMAT)
    part(b"source", os.path.relpath(source, project_root))
    part(b"content", _read(source))
    for header in headers:
        part(b"header", os.path.relpath(header, project_root))
        part(b"content", _read(header))
    for arg in command:
        part(b"arg", arg)
    for text in extra:
        part(b"extra", text)
    return h.hexdigest()


def file_digest(path):
    """sha256 of a file's content."""
    return hashlib.sha256(_read(path)).hexdigest()


def _copy_atomic(src, dest):
    tmp = "%s.%d.tmp" % (dest, os.getpid())
    try:
        shutil.copyfile(src, tmp)
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _write_atomic(path, text):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


class ObjectCache:
    """Objects under ``root`` by key (module docstring)."""

    def __init__(self, root):
        self.root = root

    def paths(self, key):
        folder = os.path.join(self.root, key[:2])
        return os.path.join(folder, key + ".o"), os.path.join(folder, key + ".sum")

    def fetch(self, key, dest):
        """Copies the object of ``key`` to ``dest``: True; False when there is
        none, or when it does not match its checksum (then it is deleted)."""
        obj, summ = self.paths(key)
        try:
            with open(summ) as f:
                want = f.read().strip()
            ok = file_digest(obj) == want
        except OSError:
            return False
        if not ok:
            for path in (obj, summ):
                try:
                    os.remove(path)
                except OSError:
                    pass
            return False
        _copy_atomic(obj, dest)
        now = time.time()
        os.utime(obj, (now, now))  # used now: prune keeps it
        return True

    def store(self, key, built):
        """Keeps the object file ``built`` under ``key``."""
        obj, summ = self.paths(key)
        os.makedirs(os.path.dirname(obj), exist_ok=True)
        _copy_atomic(built, obj)
        _write_atomic(summ, file_digest(obj) + "\n")

    def prune(self, max_age_s=MAX_AGE_S, now=None):
        """Deletes entries (and leftover temporary files) unused for max_age_s."""
        now = time.time() if now is None else now
        if not os.path.isdir(self.root):
            return
        for base, _, files in os.walk(self.root):
            for name in files:
                path = os.path.join(base, name)
                # an entry is as old as its object (fetch touches it); a .sum
                # without its object, or a temporary file, as old as itself
                obj = path[:-len(".sum")] + ".o" if name.endswith(".sum") else path
                try:
                    old = now - os.path.getmtime(obj) > max_age_s
                except OSError:
                    old = True
                if old:
                    try:
                        os.remove(path)
                    except OSError:
                        pass


def build_or_reuse(cache, key, output, build, reuse=True):
    """Puts the object of ``key`` at ``output``: from the cache when it holds
    it (and ``reuse``), else by ``build(tmp)``, which compiles to a temporary
    name that is renamed to ``output`` and stored. Returns ('reused', '') or
    ('compiled', what build returned)."""
    if reuse and cache is not None and cache.fetch(key, output):
        return "reused", ""
    tmp = output + ".part.o"
    try:
        text = build(tmp)
        os.replace(tmp, output)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    if cache is not None:
        cache.store(key, output)
    return "compiled", text

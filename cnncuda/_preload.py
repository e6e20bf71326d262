"""Which copies of cuBLAS, cuDNN and NCCL the extension binds to.

PyTorch and JAX wheels carry their own cuBLAS, cuDNN and NCCL as Python
packages (``nvidia/cu13/lib``, ``nvidia/cublas/lib``, ``nvidia/cudnn/lib``,
``nvidia/nccl/lib``), under the same sonames as the system's copies that
cnncuda's extension was linked to. A process can hold only one library of a
soname: whichever is loaded first serves everybody. When cnncuda loaded the
system's cuDNN 9.14 first, ``import torch`` afterwards found it instead of
its own 9.19 -- torch refuses an older cuDNN, and on one GPU machine the
process died inside ``import torch`` (``free(): invalid pointer``).

So before the extension loads, each of those libraries that it needs (its
ELF ``DT_NEEDED`` entries) and that a wheel in this Python environment
provides is loaded from the wheel, with ``RTLD_GLOBAL``: the extension, and
torch or JAX later, all bind to that one copy, in either import order. The
wheel's cuDNN and cuBLAS keep the major version (the soname) the extension
was built for, and cnncuda uses only their stable API, so a newer or older
minor version serves it. Where no wheel has a library, the system's copy is
used as before. ``CNNCUDA_SYSTEM_LIBS=1`` turns this off.
"""
import ctypes
import importlib.util
import os
import struct
import sys

PREFERRED = ("libcublasLt.so", "libcublas.so", "libcudnn.so", "libnccl.so")
WHEEL_FOLDERS = ("cu13", "cu12", "cublas", "cudnn", "nccl")


def needed_libraries(path):
    """The DT_NEEDED names of an ELF64 little-endian shared object, or []."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return []
            shoff = struct.unpack_from("<Q", head, 0x28)[0]
            shentsize, shnum = struct.unpack_from("<HH", head, 0x3A)
            f.seek(shoff)
            table = f.read(shentsize * shnum)
            # (sh_type, sh_offset, sh_size, sh_link) of every section
            sections = [struct.unpack_from("<4xI16xQQI", table, i * shentsize)
                        for i in range(shnum)]
            for kind, offset, size, link in sections:
                if kind != 6:                      # SHT_DYNAMIC
                    continue
                f.seek(offset)
                dynamic = f.read(size)
                _, str_offset, str_size, _ = sections[link]
                f.seek(str_offset)
                strings = f.read(str_size)
                names = []
                for at in range(0, len(dynamic) - 15, 16):
                    tag, value = struct.unpack_from("<qQ", dynamic, at)
                    if tag == 0:                   # DT_NULL
                        break
                    if tag == 1:                   # DT_NEEDED
                        names.append(strings[value:strings.index(b"\0", value)].decode())
                return names
    except (OSError, ValueError, struct.error, IndexError):
        return []
    return []


def wheel_library(name, roots):
    """The first nvidia/<folder>/lib/<name> under roots, or None."""
    for root in roots:
        for folder in WHEEL_FOLDERS:
            path = os.path.join(root, folder, "lib", name)
            if os.path.isfile(path):
                return path
    return None


def nvidia_roots():
    """The folders of the ``nvidia`` namespace package on sys.path."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec else []


def plan(needed, roots):
    """[(soname, path)] to load first, in order: for each preferred library
    the extension needs and a wheel has (cuBLASLt before cuBLAS, so that
    cuBLAS finds its own)."""
    wanted = [n for n in needed if n.startswith(PREFERRED)]
    for n in list(wanted):
        if n.startswith("libcublas.so"):
            lt = "libcublasLt" + n[len("libcublas"):]
            if lt not in wanted:
                wanted.append(lt)
    wanted.sort(key=lambda n: [n.startswith(p) for p in PREFERRED].index(True))
    steps = []
    for name in wanted:
        path = wheel_library(name, roots)
        if path:
            steps.append((name, path))
    return steps


def system_libs_asked():
    """Whether CNNCUDA_SYSTEM_LIBS asks for the system's libraries
    (cnncuda/switches.py, loaded by its path where this file runs on its own,
    as its tests run it)."""
    try:
        from .switches import system_libs
    except ImportError:
        import importlib.util
        spec = importlib.util.spec_from_file_location(
            "cnncuda_switches", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                             "switches.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        system_libs = module.system_libs
    return system_libs()


def prefer_wheel_libraries(extension_path):
    """Loads, from this environment's wheels, the libraries the extension at
    extension_path needs (see the module docstring); returns the paths
    loaded. Nothing on other systems, with CNNCUDA_SYSTEM_LIBS=1, or where
    no wheel has them; a library that fails to load is left to the system."""
    if not sys.platform.startswith("linux") or system_libs_asked():
        return []
    roots = nvidia_roots()
    if not roots:
        return []
    loaded = []
    for _, path in plan(needed_libraries(extension_path), roots):
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
        loaded.append(path)
    return loaded


def extension_file(package_dir):
    """The path of the _C extension in package_dir, or None."""
    from importlib.machinery import EXTENSION_SUFFIXES
    for suffix in EXTENSION_SUFFIXES:
        path = os.path.join(package_dir, "_C" + suffix)
        if os.path.isfile(path):
            return path
    return None

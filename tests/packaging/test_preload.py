"""cnncuda/_preload.py: cuBLAS, cuDNN and NCCL taken from this environment's
PyTorch or JAX wheels where they are there, so that cnncuda and those
frameworks share one copy of each in either import order.

The libraries here are stand-ins built with gcc (CI has no wheels of them):
an "extension" that needs libcudnn.so.9 and libcublas.so.13, and wheel
folders that hold such files. The real case (torch 2.11's wheels against a
system cuDNN 9.14) is described in BENCHMARKS.md and _preload.py."""
import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import cnncuda

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRELOAD = os.path.join(ROOT, "cnncuda", "_preload.py")


def load_preload():
    spec = importlib.util.spec_from_file_location("preload_under_test", PRELOAD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_needed_libraries_of_the_extension():
    p = load_preload()
    needed = p.needed_libraries(p.extension_file(os.path.join(ROOT, "cnncuda")))
    assert any(name.startswith("libc.so") for name in needed), needed
    if "cudnn" in cnncuda.build_info()["features"]:
        assert "libcudnn.so.9" in needed


def test_needed_libraries_of_what_is_not_a_shared_object(tmp_path):
    p = load_preload()
    for content in (b"", b"\x7fELF", b"not an elf file at all" * 10):
        path = tmp_path / "x.so"
        path.write_bytes(content)
        assert p.needed_libraries(str(path)) == []
    assert p.needed_libraries(str(tmp_path / "missing.so")) == []


def fake_wheels(root, names):
    for folder, name in names:
        lib = root / "nvidia" / folder / "lib"
        lib.mkdir(parents=True, exist_ok=True)
        (lib / name).write_bytes(b"")
    return str(root / "nvidia")


def test_plan_takes_the_libraries_the_extension_needs_from_the_wheels(tmp_path):
    p = load_preload()
    root = fake_wheels(tmp_path, [("cu13", "libcublas.so.13"), ("cu13", "libcublasLt.so.13"),
                                  ("cudnn", "libcudnn.so.9"), ("cu13", "libcudart.so.13"),
                                  ("cudnn", "libcudnn.so.8")])
    steps = p.plan(["libstdc++.so.6", "libcudnn.so.9", "libcublas.so.13", "libnccl.so.2",
                    "libc.so.6"], [root])
    assert [name for name, _ in steps] == ["libcublasLt.so.13", "libcublas.so.13",
                                           "libcudnn.so.9"]   # cuBLASLt first; no NCCL wheel
    assert steps[2][1] == os.path.join(root, "cudnn", "lib", "libcudnn.so.9")
    assert p.plan(["libcudnn.so.9"], []) == []
    assert p.plan(["libcudnn.so.8", "libcublas.so.12"], [root]) == [("libcudnn.so.8",
                                                                     os.path.join(root, "cudnn",
                                                                                  "lib",
                                                                                  "libcudnn.so.8"))]


@pytest.mark.skipif(not shutil.which("gcc") or not sys.platform.startswith("linux"),
                    reason="needs gcc on Linux")
def test_the_extension_binds_to_the_wheels_copy(tmp_path):
    """An extension linked to a 'system' libcudnn.so.9 that says "system",
    and a wheel's libcudnn.so.9 that says "wheel": after the preload the
    extension calls the wheel's, and with CNNCUDA_SYSTEM_LIBS=1 the system's."""
    def shared(path, source, *args):
        src = tmp_path / (os.path.basename(path) + ".c")
        src.write_text(source)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(path), str(src)] + list(args),
                       check=True)
    system = tmp_path / "system"
    system.mkdir()
    wheel = tmp_path / "site" / "nvidia" / "cudnn" / "lib"
    wheel.mkdir(parents=True)
    for folder, word in ((system, "system"), (wheel, "wheel")):
        shared(folder / "libcudnn.so.9", 'const char *which(void) { return "%s"; }' % word,
               "-Wl,-soname,libcudnn.so.9")
    ext = tmp_path / "ext.so"
    shared(ext, "const char *which(void);\nconst char *ask(void) { return which(); }",
           "-L%s" % system, "-l:libcudnn.so.9", "-Wl,-rpath,%s" % system)
    script = textwrap.dedent("""
        import ctypes, importlib.util, sys
        spec = importlib.util.spec_from_file_location("p", sys.argv[1])
        p = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(p)
        loaded = p.prefer_wheel_libraries(sys.argv[2])
        ext = ctypes.CDLL(sys.argv[2])
        ext.ask.restype = ctypes.c_char_p
        print(ext.ask().decode(), len(loaded))
    """)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    env.pop("CNNCUDA_SYSTEM_LIBS", None)
    run = lambda e: subprocess.run([sys.executable, "-c", script, PRELOAD, str(ext)],  # noqa: E731
                                   capture_output=True, text=True, env=e, check=True).stdout.split()
    assert run(env) == ["wheel", "1"]
    assert run(dict(env, CNNCUDA_SYSTEM_LIBS="1")) == ["system", "0"]
    assert run(dict(env, CNNCUDA_SYSTEM_LIBS="0")) == ["wheel", "1"]  # 0: not asked


def test_build_info_lists_the_wheel_libraries():
    listed = cnncuda.build_info()["wheel_libraries"]
    assert isinstance(listed, list)
    assert all(os.path.isabs(path) and "nvidia" in path for path in listed)

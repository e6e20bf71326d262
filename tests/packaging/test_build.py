"""setup.py's helpers (build_tools/), without nvcc or a GPU: the GPU
architectures a build picks, the compile pool and the object cache."""
import os
import shutil
import subprocess
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from build_tools import archs, jobs, objcache  # noqa: E402


# -- GPU architectures --------------------------------------------------------

def test_arch_list_accepts_each_form():
    assert archs.parse_arch_list("75;90") == ["75", "90"]
    assert archs.parse_arch_list(" sm_90, 7.5 ") == ["75", "90"]
    assert archs.parse_arch_list("90 75 90") == ["75", "90"]
    assert archs.parse_arch_list("compute_80") == ["80"]
    assert archs.parse_arch_list("120;100") == ["100", "120"]
    assert archs.parse_arch_list("all") == list(archs.DEFAULT_ARCHS)


@pytest.mark.parametrize("bad", ["9x", "sm_", "7.5.1", "; ,", "native", "sm90"])
def test_malformed_arch_list_names_the_variable_what_it_takes_and_what_it_got(bad):
    with pytest.raises(ValueError) as e:
        archs.parse_arch_list(bad)
    msg = str(e.value)
    assert "CNNCUDA_CUDA_ARCH" in msg and "75, 7.5 or sm_75" in msg and repr(bad) in msg


def test_arch_this_nvcc_cannot_compile_for_is_refused():
    with pytest.raises(ValueError) as e:
        archs.parse_arch_list("60;90", supported={"75", "80", "90"})
    msg = str(e.value)
    assert "CNNCUDA_CUDA_ARCH" in msg and "sm_60" in msg and "75 80 90" in msg
    assert archs.parse_arch_list("all", supported={"75", "80"}) == ["75", "80"]


def test_compute_caps_parsed_from_nvidia_smi():
    assert archs.parse_compute_caps("8.6\n9.0\n8.6\n") == ["86", "90"]
    assert archs.parse_compute_caps("[N/A]\n 12.0 \n\n7.5\n") == ["75", "120"]
    assert archs.parse_compute_caps("") == []


def fake_nvidia_smi(tmp_path, body):
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\necho \"$@\" > %s/args\n%s\n" % (tmp_path, body))
    path.chmod(0o755)
    return str(path)


def test_gpu_archs_detected_from_a_fake_nvidia_smi(tmp_path):
    smi = fake_nvidia_smi(tmp_path, "printf '8.9\\n7.5\\n'")
    assert archs.detect_gpu_archs(smi) == (["75", "89"], None)
    assert (tmp_path / "args").read_text().split() == archs.NVIDIA_SMI_QUERY


def test_gpu_detection_failures_say_why(tmp_path):
    assert archs.detect_gpu_archs(str(tmp_path / "missing")) == ([], "no nvidia-smi")
    failing = fake_nvidia_smi(tmp_path, "echo 'NVIDIA-SMI has failed'; exit 9")
    assert archs.detect_gpu_archs(failing) == ([], "nvidia-smi failed (exit 9)")
    empty = fake_nvidia_smi(tmp_path, "true")
    assert archs.detect_gpu_archs(empty) == ([], "nvidia-smi lists no GPU")


def test_choose_archs_order_variable_then_gpus_then_defaults():
    def no_call():
        raise AssertionError("detection must not run when the variable is set")

    assert archs.choose_archs({"CNNCUDA_CUDA_ARCH": "86"}, None, no_call) == (
        ["86"], "CNNCUDA_CUDA_ARCH=86")
    got, how = archs.choose_archs({}, None, lambda: (["86"], None))
    assert got == ["86"] and how.startswith("native")
    got, how = archs.choose_archs({"CNNCUDA_CUDA_ARCH": " "}, None, lambda: ([], "no nvidia-smi"))
    assert got == list(archs.DEFAULT_ARCHS) and how == "default: no nvidia-smi"


def test_gpus_this_nvcc_cannot_compile_for_are_left_out_or_fall_back():
    supported = {"75", "80", "90"}
    got, how = archs.choose_archs({}, supported, lambda: (["70", "90"], None))
    assert got == ["90"] and "sm_70 left out" in how
    got, how = archs.choose_archs({}, supported, lambda: (["70"], None))
    assert got == list(archs.DEFAULT_ARCHS) and how.startswith("default") and "sm_70" in how


def test_gencode_has_sass_for_each_and_ptx_for_the_newest():
    flags = archs.gencode_flags(["75", "80", "90"])
    assert flags == ["-gencode=arch=compute_75,code=sm_75", "-gencode=arch=compute_80,code=sm_80",
                     "-gencode=arch=compute_90,code=sm_90",
                     "-gencode=arch=compute_90,code=compute_90"]
    assert archs.describe(["75", "80", "90"]) == "sm_75,80,90 + PTX 90"


@pytest.mark.parametrize("cc", ["75", "80", "86", "87", "89", "90", "100", "120"])
def test_default_archs_run_on_every_gpu_from_turing_on(cc):
    # a cubin runs on its own major version at an equal or higher minor one;
    # PTX on its own compute capability and later ones (setup.py's docstring)
    def major_minor(a):
        return int(a[:-1]), int(a[-1])

    major, minor = major_minor(cc)
    cubin = any(major_minor(a)[0] == major and major_minor(a)[1] <= minor
                for a in archs.DEFAULT_ARCHS)
    ptx = int(cc) >= int(max(archs.DEFAULT_ARCHS, key=int))
    assert cubin or ptx
    if cc in ("75", "80", "86", "89", "90"):  # the GPUs of the old list run machine code
        assert cubin


# -- the compile pool ---------------------------------------------------------

def test_job_count_from_max_jobs_or_the_usable_cpus():
    assert jobs.job_count({"MAX_JOBS": "3"}) == 3
    assert jobs.job_count({}) == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5"])
def test_malformed_max_jobs_names_the_variable(bad):
    with pytest.raises(ValueError) as e:
        jobs.job_count({"MAX_JOBS": bad})
    assert "MAX_JOBS" in str(e.value) and "positive whole number" in str(e.value)
    assert repr(bad) in str(e.value)


def test_pool_starts_the_heaviest_first_and_stops_after_a_failure():
    ran = []
    logged = []

    def task(name, fail=False):
        def fn():
            ran.append(name)
            if fail:
                raise RuntimeError("nvcc said no")
            return "built " + name
        return fn

    jobs.run_all([("small", 1, task("small")), ("big", 30, task("big")),
                  ("mid", 5, task("mid"))], 1, log=logged.append)
    assert ran == ["big", "mid", "small"] and logged == ["built big", "built mid", "built small"]
    ran.clear()
    with pytest.raises(jobs.JobFailed) as e:
        jobs.run_all([("a.cu", 3, task("a.cu")), ("b.cu", 2, task("b.cu", fail=True)),
                      ("c.cu", 1, task("c.cu"))], 1, log=logged.append)
    assert "b.cu" in str(e.value) and "nvcc said no" in str(e.value)
    assert ran == ["a.cu", "b.cu"]


def test_pool_runs_tasks_at_once():
    both = threading.Barrier(2, timeout=10)  # broken (raises) unless two wait together
    jobs.run_all([(name, 1, both.wait) for name in ("x", "y")], 2, log=lambda text: None)


# -- the object cache ---------------------------------------------------------

@pytest.fixture
def project(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.c").write_text(
        '#include <stdio.h>\n#include "a.h"\n#if FAST\n  #  include "fast.h"\n#endif\nint a;\n')
    (tmp_path / "src" / "a.h").write_text("#include <b.h>\n")
    (tmp_path / "src" / "fast.h").write_text("int fast;\n")
    (tmp_path / "inc" / "b.h").write_text("int b;\n")
    (tmp_path / "inc" / "unrelated.h").write_text("int u;\n")
    return tmp_path


def key_of(project, command=("cc", "-O3", "-c"), extra=()):
    src = str(project / "src" / "a.c")
    headers = objcache.reachable_headers(src, [str(project / "inc")])
    return objcache.object_key(src, list(command), headers, str(project), extra)


def test_headers_a_source_can_include(project):
    got = objcache.reachable_headers(str(project / "src" / "a.c"), [str(project / "inc")])
    assert got == sorted(str(project / p) for p in ("src/a.h", "src/fast.h", "inc/b.h"))


def test_key_follows_source_headers_command_and_compiler(project):
    base = key_of(project)
    assert key_of(project) == base
    (project / "inc" / "unrelated.h").write_text("int changed;\n")
    os.utime(project / "src" / "a.c", (1, 1))  # a touch alone changes nothing
    assert key_of(project) == base
    assert key_of(project, ("cc", "-O2", "-c")) != base
    assert key_of(project, extra=["gcc 13"]) != base
    for path, text in (("src/a.c", "int a2;\n"), ("inc/b.h", "int b2;\n"),
                       ("src/fast.h", "int fast2;\n")):
        old = (project / path).read_text()
        (project / path).write_text(old + text)
        assert key_of(project) != base, path
        (project / path).write_text(old)
        assert key_of(project) == base


def test_key_command_drops_paths_that_change_each_build(tmp_path):
    def numpy_in(folder, text):
        inc = tmp_path / folder / "numpy" / "include"
        inc.mkdir(parents=True)
        (inc / "ndarrayobject.h").write_text(text)
        return str(inc)

    def key_cmd(numpy_inc, out):
        command = ["cc", "-I" + numpy_inc, "-c", "a.c", "-o", out]
        stand_in = {numpy_inc: "<numpy %s>" % objcache.tree_digest(numpy_inc)}
        return objcache.key_command(command, "a.c", out, stand_in)

    first = key_cmd(numpy_in("build-env-1", "v2"), "/tmp/t1/a.o")
    assert first == key_cmd(numpy_in("build-env-2", "v2"), "/tmp/t2/a.o")
    assert first != key_cmd(numpy_in("build-env-3", "v3"), "/tmp/t1/a.o")
    assert "<source>" in first and "<output>" in first


def test_cached_object_reused_without_compiling(tmp_path):
    cache = objcache.ObjectCache(str(tmp_path / "cache"))
    builds = []

    def build(tmp):
        builds.append(tmp)
        with open(tmp, "wb") as f:
            f.write(b"\x7fELF object")
        return "compiled it"

    out1, out2 = str(tmp_path / "a.o"), str(tmp_path / "again.o")
    assert objcache.build_or_reuse(cache, "ab12", out1, build) == ("compiled", "compiled it")
    assert objcache.build_or_reuse(cache, "ab12", out2, build) == ("reused", "")
    assert len(builds) == 1 and open(out2, "rb").read() == b"\x7fELF object"
    assert objcache.build_or_reuse(cache, "ab12", out2, build, reuse=False)[0] == "compiled"
    assert objcache.build_or_reuse(cache, "cd34", out2, build)[0] == "compiled"


def test_corrupt_entry_is_not_reused(tmp_path):
    cache = objcache.ObjectCache(str(tmp_path / "cache"))
    built = tmp_path / "a.o"
    built.write_bytes(b"good object" * 100)
    cache.store("ab12", str(built))
    obj, _ = cache.paths("ab12")
    with open(obj, "r+b") as f:
        f.truncate(50)  # as a disk full or a crash mid-copy would leave it
    assert not cache.fetch("ab12", str(tmp_path / "out.o"))
    assert not os.path.exists(obj) and not os.path.exists(tmp_path / "out.o")
    status, _ = objcache.build_or_reuse(cache, "ab12", str(tmp_path / "out.o"),
                                        lambda tmp: shutil.copyfile(built, tmp) and "")
    assert status == "compiled" and cache.fetch("ab12", str(tmp_path / "out2.o"))


def test_failed_compile_leaves_no_object_and_no_entry(tmp_path):
    cache = objcache.ObjectCache(str(tmp_path / "cache"))

    def half_then_fail(tmp):
        with open(tmp, "wb") as f:
            f.write(b"half an obj")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        objcache.build_or_reuse(cache, "ab12", str(tmp_path / "a.o"), half_then_fail)
    assert not os.listdir(tmp_path) and not cache.fetch("ab12", str(tmp_path / "b.o"))


def test_entry_without_checksum_is_not_reused(tmp_path):
    cache = objcache.ObjectCache(str(tmp_path / "cache"))
    obj, _ = cache.paths("ab12")
    os.makedirs(os.path.dirname(obj))
    with open(obj, "wb") as f:  # a build stopped between the object and its .sum
        f.write(b"object")
    assert not cache.fetch("ab12", str(tmp_path / "out.o"))


def test_prune_deletes_entries_unused_for_a_month(tmp_path):
    cache = objcache.ObjectCache(str(tmp_path / "cache"))
    built = tmp_path / "a.o"
    built.write_bytes(b"object")
    for key in ("aa01", "bb02"):
        cache.store(key, str(built))
    old_obj, old_sum = cache.paths("aa01")
    os.utime(old_obj, (0, 0))
    cache.prune()
    assert not os.path.exists(old_obj) and not os.path.exists(old_sum)
    assert cache.fetch("bb02", str(tmp_path / "out.o"))


@pytest.mark.skipif(not shutil.which("cc"), reason="no C compiler")
def test_a_real_compile_through_the_cache(project, tmp_path):
    cache = objcache.ObjectCache(str(tmp_path / "cache"))
    src = str(project / "src" / "a.c")

    def build(tmp):
        subprocess.run(["cc", "-I" + str(project / "inc"), "-c", src, "-o", tmp], check=True)
        return ""

    out = str(tmp_path / "a.o")
    assert objcache.build_or_reuse(cache, key_of(project), out, build)[0] == "compiled"
    first = open(out, "rb").read()
    os.remove(out)
    assert objcache.build_or_reuse(cache, key_of(project), out, build)[0] == "reused"
    assert open(out, "rb").read() == first and first[:4] == b"\x7fELF"

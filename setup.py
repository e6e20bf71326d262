"""Build of cnncuda._C.

C sources (csrc/) are compiled with the C compiler at -O3, with OpenMP when
the compiler accepts -fopenmp. When nvcc is found (CUDA_HOME or CUDA_PATH,
nvcc on PATH, /usr/local/cuda) the CUDA sources (cuda/) are compiled too and
the CUDA runtime is linked statically; cuBLAS, cuDNN and NCCL are probed
(header and library) and compiled in when found. CNNCUDA_CUDA=0 forces a
CPU-only build.

GPU architectures (build_tools/archs.py). CNNCUDA_CUDA_ARCH="75;90" (or
"7.5 9.0", "sm_75,sm_90"; "all" for the defaults) picks them. Without it the
build compiles for this machine's GPUs only, as CMake's "native" does: the
compute capabilities `nvidia-smi --query-gpu=compute_cap` lists. Where that
finds none (no GPU or no driver: a container build, CI), the defaults:
machine code (SASS) for sm_75, sm_80 and sm_90, and PTX for compute_90. Why
these: a cubin runs on every GPU of its major compute capability with an
equal or higher minor one (NVIDIA's compatibility guides: a 7.0 cubin runs on
7.5, not on 8.x), so the sm_80 cubin runs on sm_86 (A10, RTX 30x0, A40) and
sm_89 (L4, L40, RTX 40x0) GPUs, and the sm_86 and sm_89 cubins built before
only bought ptxas's scheduling for them (nvcc 13.0 gives the two the same
code, ordered differently from sm_80's; the speed difference is not
measured; CNNCUDA_CUDA_ARCH="75;80;86;90" adds it): no kernel has code of its
own for 8.6 or 8.9 (cuda/ tests __CUDA_ARCH__ >= 800 and >= 900 only). PTX runs
only on its own compute capability and later ones, compiled by the driver at
load time, so PTX for compute_90 serves GPUs newer than Hopper (Blackwell)
but not sm_86 or sm_89: those run the sm_80 cubin. sm_75 (T4) has nothing
below it and keeps its cubin. Every list, native or given, gets PTX for its
newest architecture.

Parallel and incremental (build_tools/jobs.py, build_tools/objcache.py).
The .cu files, then the .c files, are compiled MAX_JOBS at a time (default:
the CPUs this process may run on), the largest first: a source's bytes with
its headers' stand for its time. One file, gemm.cu, is about 40% of the CUDA
work (26 of 63 s for sm_90 on one core); second of 27 by size, it starts at
once with two jobs or more. Each object is kept in build/cnncuda-objects/
of this checkout (a folder pip's temporary build directories do not touch;
`rm -rf build` empties it) under a key of the source's content, the content
of the headers it can include and the exact compile command, so that
reinstalling, or installing another extra, with no source changed compiles
nothing; a changed file recompiles that file and those that include it.

The build prints one line saying what it found ("cnncuda build: ..."; pip
shows it with -v); `python -m cnncuda` prints it from the installed module.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # build_tools/, wherever the build backend runs from
from build_tools import archs as gpu_archs  # noqa: E402
from build_tools import jobs, objcache  # noqa: E402
from build_tools import switches as build_switches  # noqa: E402

CACHE_DIR = os.path.join(HERE, "build", "cnncuda-objects")
INCLUDE_DIRS = ["/usr/include", "/usr/include/x86_64-linux-gnu", "/usr/local/include"]
LIB_DIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"]
PROJECT_INCLUDES = [os.path.join(HERE, "csrc"), os.path.join(HERE, "cuda")]


def find_nvcc():
    if not build_switches.cuda_wanted(os.environ):
        return None, "disabled by CNNCUDA_CUDA=0"
    candidates = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "bin", "nvcc"))
    on_path = shutil.which("nvcc")
    if on_path:
        candidates.append(on_path)
    candidates.append("/usr/local/cuda/bin/nvcc")
    for nvcc in candidates:
        if os.path.isfile(nvcc) and os.access(nvcc, os.X_OK):
            return os.path.realpath(nvcc), None
    return None, "no nvcc found"


def nvcc_version(nvcc):
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    m = re.search(r"release (\d+\.\d+)", out)
    return m.group(1) if m else None


def find_library(cuda_home, header, libname):
    """(include_dir, lib_dir) where header and lib<libname>.so both exist, or None."""
    includes = [os.path.join(cuda_home, "include")] + INCLUDE_DIRS
    libs = [os.path.join(cuda_home, d) for d in ("lib64", "lib", "targets/x86_64-linux/lib")] + LIB_DIRS
    inc = next((d for d in includes if os.path.isfile(os.path.join(d, header))), None)
    lib = next((d for d in libs if glob.glob(os.path.join(d, "lib%s.so*" % libname))), None)
    return (inc, lib) if inc and lib else None


def cudnn_version(include_dir):
    text = ""
    for name in ("cudnn_version.h", "cudnn.h"):
        path = os.path.join(include_dir, name)
        if os.path.isfile(path):
            with open(path, errors="replace") as f:
                text += f.read()
    parts = [re.search(r"#define CUDNN_%s\s+(\d+)" % k, text) for k in ("MAJOR", "MINOR", "PATCHLEVEL")]
    return ".".join(p.group(1) for p in parts) if all(parts) else "?"


def compiler_accepts(compiler_cmd, flag):
    """Whether the C compiler compiles and links a tiny program with `flag`."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "t.c")
        with open(src, "w") as f:
            f.write("#include <omp.h>\nint main(void){return omp_get_max_threads() > 0 ? 0 : 1;}\n")
        try:
            r = subprocess.run(compiler_cmd + [flag, src, "-o", os.path.join(tmp, "t")],
                               capture_output=True)
        except OSError:
            return False
        return r.returncode == 0


def version_text(tool):
    """What ``tool --version`` prints (part of every object's cache key), or ''."""
    try:
        return subprocess.run([tool, "--version"], capture_output=True, text=True,
                              timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def open_cache():
    """The object cache, or None (said why) where its folder cannot be written."""
    try:
        os.makedirs(CACHE_DIR, exist_ok=True)
        if os.access(CACHE_DIR, os.W_OK):
            cache = objcache.ObjectCache(CACHE_DIR)
            cache.prune()
            return cache
    except OSError:
        pass
    print("cnncuda build: object cache off (%s cannot be written)" % CACHE_DIR, flush=True)
    return None


def weight(source, headers):
    """What the pool orders compiles by: the bytes of a source and its headers."""
    return sum(os.path.getsize(p) for p in [source] + headers)


def report(kind, status, start, njobs):
    compiled = sum(1 for s in status.values() if s == "compiled")
    print("cnncuda build: %d %s objects, %d compiled, %d reused from %s; %.1f s, %d jobs"
          % (len(status), kind, compiled, len(status) - compiled,
             os.path.relpath(CACHE_DIR, HERE), time.monotonic() - start, njobs), flush=True)


class BuildExt(build_ext):
    def build_extensions(self):
        ext = self.extensions[0]
        self.njobs = jobs.job_count(os.environ)
        self.cache = open_cache()
        # build_ext skips a module newer than its sources, even one built
        # with another configuration (a CUDA build, then CNNCUDA_CUDA=0): with
        # the cache a full pass costs seconds, so it always runs; --force
        # still means every object compiled anew
        self.reuse = not self.force
        self.force = True
        cc = self.compiler.compiler_so[:1]
        found = []
        openmp = compiler_accepts(cc, "-fopenmp")
        if openmp:
            ext.extra_compile_args.append("-fopenmp")
            ext.extra_link_args.append("-fopenmp")
            ext.define_macros.append(("CNNCUDA_HAVE_OPENMP", "1"))
        found.append("cc %s (openmp %s)" % (os.path.basename(cc[0]), "yes" if openmp else "no"))

        nvcc, why_not = find_nvcc()
        if nvcc:
            cuda_home = os.path.dirname(os.path.dirname(nvcc))
            version = nvcc_version(nvcc) or "?"
            archs, how = gpu_archs.choose_archs(os.environ, gpu_archs.supported_archs(nvcc))
            ext.define_macros.append(("CNNCUDA_HAVE_CUDA", "1"))
            cudart_dirs = [d for d in (os.path.join(cuda_home, "lib64"), os.path.join(cuda_home, "lib"),
                                       os.path.join(cuda_home, "targets/x86_64-linux/lib"))
                           if glob.glob(os.path.join(d, "libcudart_static.a"))]
            ext.library_dirs.extend(cudart_dirs[:1])
            ext.libraries.extend(["cudart_static", "dl", "rt", "pthread", "stdc++"])
            ext.include_dirs.append(os.path.join(cuda_home, "include"))
            libs = []
            lib_headers = []
            for macro, header, libname in (("CNNCUDA_HAVE_CUBLAS", "cublas_v2.h", "cublas"),
                                           ("CNNCUDA_HAVE_CUDNN", "cudnn.h", "cudnn"),
                                           ("CNNCUDA_HAVE_NCCL", "nccl.h", "nccl")):
                hit = find_library(cuda_home, header, libname)
                if not hit:
                    libs.append("%s no" % libname)
                    continue
                inc, lib = hit
                ext.define_macros.append((macro, "1"))
                ext.include_dirs.append(inc)
                ext.library_dirs.append(lib)
                ext.runtime_library_dirs.append(lib)
                ext.libraries.append(libname)
                lib_headers += [p for p in (os.path.join(inc, header),
                                            os.path.join(inc, libname + "_version.h"))
                                if os.path.isfile(p)]
                extra = " %s" % cudnn_version(inc) if libname == "cudnn" else ""
                libs.append("%s yes%s" % (libname, extra))
            have = {m for m, _ in ext.define_macros}
            with_cudnn = "CNNCUDA_HAVE_CUDNN" in have and "CNNCUDA_HAVE_CUBLAS" in have
            with_nccl = "CNNCUDA_HAVE_NCCL" in have
            found.append("nvcc %s (%s), %s (%s); %s"
                         % (version, nvcc, gpu_archs.describe(archs), how, ", ".join(libs)))
        else:
            found.append("CUDA: %s, CPU-only build" % why_not)
        summary = "; ".join(found)
        print("cnncuda build: " + summary, flush=True)
        if nvcc:
            objects = self.compile_cuda(nvcc, archs, ext.include_dirs, lib_headers, with_cudnn,
                                        with_nccl)
            ext.extra_objects.extend(objects)
        # registry.c alone reports it, so only its command (and cache key)
        # changes with the summary
        self.source_args = {os.path.join(HERE, "csrc", "registry.c"): [
            '-DCNNCUDA_BUILD_SUMMARY="%s"' % summary.replace('"', "'")]}
        self.compiler.compile = self.compile_c
        super().build_extensions()

    def run_cached(self, kind, items):
        """Compiles ``items`` -- (source, object, command key, headers, extra,
        build) -- MAX_JOBS at a time, each object reused from the cache when
        its key is there; build(tmp) compiles the source to tmp."""
        start = time.monotonic()
        status = {}
        tasks = []
        for src, obj, key_cmd, headers, extra, build in items:
            key = objcache.object_key(src, key_cmd, headers, HERE, extra)

            def task(src=src, obj=obj, key=key, build=build):
                status[src], text = objcache.build_or_reuse(self.cache, key, obj, build,
                                                            reuse=self.reuse)
                return text

            tasks.append((os.path.relpath(src, HERE), weight(src, headers), task))
        jobs.run_all(tasks, self.njobs)
        report(kind, status, start, self.njobs)

    def compile_c(self, sources, output_dir=None, macros=None, include_dirs=None, debug=False,
                  extra_preargs=None, extra_postargs=None, depends=None):
        """CCompiler.compile, MAX_JOBS at a time through the object cache."""
        cc = self.compiler
        macros, objects, extra_postargs, pp_opts, build = cc._setup_compile(
            output_dir, macros, include_dirs, sources, depends, extra_postargs)
        cc_args = cc._get_cc_args(pp_opts, debug, extra_preargs)
        numpy_include = numpy.get_include()
        # pip's isolated numpy is somewhere new every build: its headers'
        # content stands for its path in the keys
        stand_ins = {numpy_include: "<numpy headers %s>" % objcache.tree_digest(numpy_include)}
        extra = [version_text(cc.compiler_so[0])]
        items = []
        for obj in objects:
            src, suffix = build[obj]
            post = extra_postargs + self.source_args.get(os.path.abspath(src), [])
            command = cc.compiler_so + cc_args + [src, "-o", obj] + post

            def compile_one(tmp, src=src, suffix=suffix, post=post):
                cc._compile(tmp, src, suffix, cc_args, post, pp_opts)
                return ""

            items.append((os.path.abspath(src), obj,
                          objcache.key_command(command, src, obj, stand_ins),
                          objcache.reachable_headers(src, PROJECT_INCLUDES), extra, compile_one))
        self.run_cached("C", items)
        return objects

    def compile_cuda(self, nvcc, archs, include_dirs, lib_headers, with_cudnn, with_nccl):
        """Compiles cuda/*.cu; the cudnn engine's files (cudnn_*.cu, cublas_*.cu,
        backend_cudnn.cu) only when cuDNN and cuBLAS were found, the NCCL
        communicator (comm_nccl.cu) only when NCCL was (registry.c stands in
        for it otherwise)."""
        sources = sorted(glob.glob(os.path.join(HERE, "cuda", "*.cu")))
        if not with_cudnn:
            sources = [f for f in sources if not os.path.basename(f).startswith(
                ("cudnn_", "cublas_", "backend_cudnn"))]
        if not with_nccl:
            sources = [f for f in sources if not os.path.basename(f).startswith("comm_nccl")]
        out_dir = os.path.join(self.build_temp, "cuda")
        os.makedirs(out_dir, exist_ok=True)
        flags = ["-O3", "-std=c++20", "-Xcompiler", "-fPIC"]
        flags += ["-I" + d for d in dict.fromkeys([os.path.join(HERE, "csrc")] + include_dirs)
                  if d.startswith("/") and d not in ("/usr/include", numpy.get_include())]
        flags += gpu_archs.gencode_flags(archs)
        # the library headers found (cudnn.h, nccl.h: not under a versioned
        # path) and nvcc's version enter each key
        extra = [version_text(nvcc)] + ["%s %s" % (h, objcache.file_digest(h)) for h in lib_headers]
        items = []
        objects = []
        for src in sources:
            obj = os.path.join(out_dir, os.path.basename(src) + ".o")

            def compile_one(tmp, src=src):
                cmd = [nvcc, "-c", src, "-o", tmp] + flags
                start = time.monotonic()
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    raise RuntimeError("%s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
                return "%s\n%s%s(%.1f s)" % (" ".join(cmd), r.stdout, r.stderr,
                                              time.monotonic() - start)

            items.append((src, obj, objcache.key_command([nvcc, "-c", src, "-o", obj] + flags,
                                                         src, obj),
                          objcache.reachable_headers(src, PROJECT_INCLUDES), extra, compile_one))
            objects.append(obj)
        self.run_cached("CUDA", items)
        return objects


def c_sources():
    files = []
    for pattern in ("csrc/*.c", "csrc/net/*.c", "csrc/cpu/*.c", "csrc/py/*.c"):
        files.extend(sorted(glob.glob(pattern, root_dir=HERE)))
    return files


setup(
    ext_modules=[
        Extension(
            "cnncuda._C",
            sources=c_sources(),
            include_dirs=[numpy.get_include(), os.path.join(HERE, "csrc")],
            extra_compile_args=["-O3", "-std=c11", "-fno-math-errno", "-Wall",
                                "-Wno-unknown-pragmas", "-pthread"],
            extra_link_args=["-pthread"],
            define_macros=[],
        )
    ],
    cmdclass={"build_ext": BuildExt},
)

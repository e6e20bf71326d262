"""Build of cnncuda._C.

C sources (csrc/) are compiled with the C compiler at -O3, with OpenMP when
the compiler accepts -fopenmp. When nvcc is found (CUDA_HOME or CUDA_PATH,
nvcc on PATH, /usr/local/cuda) the CUDA sources (cuda/) are compiled too and
the CUDA runtime is linked statically; cuBLAS, cuDNN and NCCL are probed
(header and library) and compiled in when found. CNNCUDA_CUDA=0 forces a
CPU-only build; CNNCUDA_CUDA_ARCH="75;90" picks the GPU architectures (the
default covers T4 (sm_75) to Hopper (sm_90) plus PTX for newer GPUs).

The build prints one line saying what it found.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ARCHS = ["75", "80", "86", "89", "90"]
INCLUDE_DIRS = ["/usr/include", "/usr/include/x86_64-linux-gnu", "/usr/local/include"]
LIB_DIRS = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/lib"]


def find_nvcc():
    if os.environ.get("CNNCUDA_CUDA", "1").strip().lower() in ("0", "no", "off", "false"):
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


def cuda_archs():
    env = os.environ.get("CNNCUDA_CUDA_ARCH", "").strip()
    if not env:
        return DEFAULT_ARCHS
    return [a for a in re.split(r"[;, ]+", env.replace("sm_", "").replace(".", "")) if a]


class BuildExt(build_ext):
    def build_extensions(self):
        ext = self.extensions[0]
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
            archs = cuda_archs()
            ext.define_macros.append(("CNNCUDA_HAVE_CUDA", "1"))
            cudart_dirs = [d for d in (os.path.join(cuda_home, "lib64"), os.path.join(cuda_home, "lib"),
                                       os.path.join(cuda_home, "targets/x86_64-linux/lib"))
                           if glob.glob(os.path.join(d, "libcudart_static.a"))]
            ext.library_dirs.extend(cudart_dirs[:1])
            ext.libraries.extend(["cudart_static", "dl", "rt", "pthread", "stdc++"])
            ext.include_dirs.append(os.path.join(cuda_home, "include"))
            libs = []
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
                extra = " %s" % cudnn_version(inc) if libname == "cudnn" else ""
                libs.append("%s yes%s" % (libname, extra))
            have = {m for m, _ in ext.define_macros}
            with_cudnn = "CNNCUDA_HAVE_CUDNN" in have and "CNNCUDA_HAVE_CUBLAS" in have
            with_nccl = "CNNCUDA_HAVE_NCCL" in have
            objects = self.compile_cuda(nvcc, cuda_home, archs, ext.include_dirs, with_cudnn,
                                        with_nccl)
            ext.extra_objects.extend(objects)
            # build_ext relinks only when a dependency is newer than the module:
            # the objects (compiled anew every build) are, so a .cu change alone
            # relinks too (extra_objects are not checked)
            ext.depends.extend(objects)
            found.append("nvcc %s (%s), sm_%s + PTX; %s"
                         % (version, nvcc, ",".join(archs), ", ".join(libs)))
        else:
            found.append("CUDA: %s, CPU-only build" % why_not)
        summary = "; ".join(found)
        ext.define_macros.append(("CNNCUDA_BUILD_SUMMARY", '"%s"' % summary.replace('"', "'")))
        print("cnncuda build: " + summary, flush=True)
        super().build_extensions()

    def compile_cuda(self, nvcc, cuda_home, archs, include_dirs, with_cudnn, with_nccl):
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
        gencode = []
        for a in archs:
            gencode.append("-gencode=arch=compute_%s,code=sm_%s" % (a, a))
        gencode.append("-gencode=arch=compute_%s,code=compute_%s" % (archs[-1], archs[-1]))
        objects = []
        for src in sources:
            obj = os.path.join(out_dir, os.path.basename(src) + ".o")
            cmd = [nvcc, "-c", src, "-o", obj, "-O3", "-std=c++20", "-Xcompiler", "-fPIC",
                   "-I" + os.path.join(HERE, "csrc")]
            cmd += ["-I" + d for d in dict.fromkeys(include_dirs) if d.startswith("/") and d != "/usr/include"]
            cmd += gencode
            print(" ".join(cmd), flush=True)
            subprocess.run(cmd, check=True)
            objects.append(obj)
        return objects


def c_sources():
    files = []
    for pattern in ("csrc/*.c", "csrc/cpu/*.c", "csrc/py/*.c"):
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

"""The environment header of a benchmark: the machine and every version that
changes a timing, printed above the table and written into the JSON.

GPU facts come from the C binding (``_C.cuda_versions()``: driver, CUDA
runtime, cuDNN, cuBLAS, NCCL, as compiled and loaded), else from NVML and
``nvidia-smi``; a fact nothing reports is left out rather than guessed.
Library versions are read from the installed packages' metadata, so torch
and jax are not imported for this.
"""
import datetime
import os
import platform
import shutil
import subprocess
from importlib import metadata

import numpy as np

from .. import _C
from ..runtime import _cores, build_info, cuda_devices, devices
from .nvml import nvml

__all__ = ["environment", "format_environment", "cpu_model"]

_VERSION_KEYS = {"driver": "driver", "runtime": "cuda_runtime", "cudnn": "cudnn",
                 "cublas": "cublas", "nccl": "nccl"}


def cpu_model():
    """The CPU's model name, from /proc/cpuinfo where there is one."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _package_version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _nvidia_smi():
    """{'gpus': [...], 'driver': ..., 'cuda_driver': ...} from nvidia-smi, or {}."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return {}
    try:
        query = subprocess.run([exe, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=20)
        header = subprocess.run([exe], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return {}
    found = {}
    lines = [line.split(",") for line in query.stdout.splitlines() if "," in line]
    if query.returncode == 0 and lines:
        found["gpus"] = [parts[0].strip() for parts in lines]
        found["driver"] = lines[0][1].strip()
    for token in header.stdout.split("CUDA Version:")[1:2]:
        found["cuda_driver"] = token.split()[0].strip("|") if token.split() else None
    return found


def environment():
    """A dict of the machine and the versions (JSON-ready)."""
    info = build_info()
    env = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": _cores(),
        "machine": platform.machine(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cnncuda": info["version"],
        "build": info["summary"],
        "gemm": info["gemm"],
        "engines": devices(),
        "wheel_libraries": info["wheel_libraries"] or None,
    }
    for package in ("torch", "jax", "jaxlib", "matplotlib"):
        version = _package_version(package)
        if version:
            env[package] = version
    versions = getattr(_C, "cuda_versions", None)
    for key, value in (versions() if versions else {}).items():
        if value:
            env[_VERSION_KEYS.get(key, key)] = str(value)
    gpus = cuda_devices()
    handle = nvml()
    if handle.available:
        gpus = gpus or [handle.name()]
        env.setdefault("driver", handle.driver_version())
        env.setdefault("cuda_driver", handle.cuda_driver_version())
    elif not gpus or "driver" not in env:
        smi = _nvidia_smi()
        gpus = gpus or smi.get("gpus", [])
        for key in ("driver", "cuda_driver"):
            if smi.get(key):
                env.setdefault(key, smi[key])
    env["gpus"] = [g for g in gpus if g]
    return {k: v for k, v in env.items() if v is not None}


def format_environment(env):
    """The header's lines."""
    libs = ["cnncuda %s" % env["cnncuda"], "Python %s" % env["python"], "NumPy %s" % env["numpy"]]
    libs += ["%s %s" % (p, env[p]) for p in ("torch", "jax", "matplotlib") if p in env]
    lines = [" | ".join(libs + [env["date"]])]
    lines.append("CPU: %s, %d cores (%d usable) | %s | %s"
                 % (env["cpu"], env["cores"] or 0, env["usable_cores"], env["machine"], env["os"]))
    if env.get("gpus"):
        parts = ["GPU: %s" % ", ".join(env["gpus"])]
    else:
        parts = ["GPU: none found"]
    labels = (("driver", "driver %s"), ("cuda_runtime", "CUDA runtime %s"),
              ("cuda_driver", "driver's CUDA %s"), ("cudnn", "cuDNN %s"), ("cublas", "cuBLAS %s"),
              ("nccl", "NCCL %s"))
    parts += [fmt % env[key] for key, fmt in labels if env.get(key)]
    lines.append(" | ".join(parts))
    lines.append("build: %s | cpu gemm: %s | engines here: %s"
                 % (env["build"], env["gemm"], ", ".join(env["engines"])))
    if env.get("wheel_libraries"):
        lines.append("GPU libraries from the Python environment's wheels: %s"
                     % ", ".join(os.path.basename(p) for p in env["wheel_libraries"]))
    return lines

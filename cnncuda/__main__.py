"""``python -m cnncuda``: what this build holds and what can run here.

The build's own line (pip shows it only with ``-v``), the parts and engines
compiled in, the engines this machine can run now and why each other built
one cannot, the GPUs with their compute capabilities, and the CPU GEMM's
kernel.
"""
import os

import cnncuda


def report():
    """The text ``python -m cnncuda`` prints."""
    info = cnncuda.build_info()
    runnable = cnncuda.devices()
    lines = ["cnncuda %s (%s)" % (info["version"], os.path.dirname(os.path.abspath(cnncuda.__file__))),
             "build: " + info["summary"],
             "compiled in: " + " ".join(info["features"]),
             "engines built: " + " ".join(info["engines"]),
             "engines that run here: " + " ".join(runnable)]
    for name in info["engines"]:
        if name not in runnable:
            lines.append("  %s cannot: %s" % (name, cnncuda._C.engine_status(name)))
    gpus = cnncuda.cuda_devices()
    caps = cnncuda.cuda_compute_capabilities()
    lines.append("GPUs: " + ("; ".join("%d: %s (compute capability %d.%d)" % (i, name, *cap)
                                       for i, (name, cap) in enumerate(zip(gpus, caps)))
                             if gpus else "none visible"))
    lines.append("CPU GEMM kernel: %s; omp threads by default: %d"
                 % (info["gemm"], cnncuda.get_num_threads()))
    if info["wheel_libraries"]:
        lines.append("libraries from PyTorch/JAX wheels: " + " ".join(info["wheel_libraries"]))
    return "\n".join(lines)


if __name__ == "__main__":
    print(report())

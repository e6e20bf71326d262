"""Which GPU architectures nvcc compiles cuda/ for.

In this order:

1. ``CNNCUDA_CUDA_ARCH`` when set: ``"75;90"``, ``"7.5,9.0"``, ``"sm_75 sm_90"``,
   or ``"all"`` (DEFAULT_ARCHS even where a GPU is visible).
2. The GPUs of this machine, as CMake's ``native`` does: the compute
   capabilities ``nvidia-smi --query-gpu=compute_cap`` lists, those this nvcc
   can compile for.
3. DEFAULT_ARCHS, where nvidia-smi is missing, fails or lists no GPU this nvcc
   knows.

Every list gets machine code (SASS) for each of its architectures and PTX for
the newest one (gencode_flags); setup.py's docstring says why the defaults
are 75, 80 and 90.
"""
import re
import subprocess

from . import switches

VARIABLE = "CNNCUDA_CUDA_ARCH"
DEFAULT_ARCHS = ("75", "80", "90")
NVIDIA_SMI_QUERY = ["--query-gpu=compute_cap", "--format=csv,noheader"]

_ARCH = re.compile(r"(?:sm_|compute_)?(\d{2,3})|(\d{1,2})\.(\d)")


def _accepted():
    return ("%s accepts GPU architectures separated by ';', ',' or spaces, each written "
            "75, 7.5 or sm_75, or 'all' for the defaults (%s)"
            % (VARIABLE, ";".join(DEFAULT_ARCHS)))


def parse_arch_list(text, supported=None):
    """The architectures ``text`` (CNNCUDA_CUDA_ARCH's value) names, as sorted
    unique strings of digits, e.g. ``"sm_90; 7.5"`` -> ``['75', '90']``.

    ``supported``: the architectures this nvcc compiles for (supported_archs),
    or None when unknown. Raises ValueError naming the variable, what it
    accepts and what it got."""
    value = text.strip()
    if value.lower() == "all":
        return default_archs(supported)
    archs = set()
    for token in re.split(r"[;,\s]+", value):
        if not token:
            continue
        m = _ARCH.fullmatch(token.lower())
        if not m:
            raise ValueError("%s: %r is not a GPU architecture. %s; got %r"
                             % (VARIABLE, token, _accepted(), text))
        archs.add(m.group(1) or m.group(2) + m.group(3))
    if not archs:
        raise ValueError("%s names no GPU architecture. %s; got %r" % (VARIABLE, _accepted(), text))
    unknown = sorted(a for a in archs if supported is not None and a not in supported)
    if unknown:
        raise ValueError("%s: this nvcc cannot compile for sm_%s; it compiles for %s; got %r"
                         % (VARIABLE, ", sm_".join(unknown),
                            " ".join(sorted(supported, key=int)), text))
    return sorted(archs, key=int)


def default_archs(supported=None):
    """DEFAULT_ARCHS less those this nvcc cannot compile for (all of them when
    it is not known or none would be left)."""
    kept = [a for a in DEFAULT_ARCHS if supported is None or a in supported]
    return kept or list(DEFAULT_ARCHS)


def supported_archs(nvcc):
    """The architectures ``nvcc --list-gpu-code`` lists (``sm_90`` -> ``'90'``;
    the ``sm_90a``-style variants left out), or None where it lists none."""
    try:
        out = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = set(re.findall(r"\bsm_(\d+)\b", out))
    return found or None


def parse_compute_caps(text):
    """The architectures in nvidia-smi's ``compute_cap`` answer, one GPU a line
    (``"8.6\\n9.0\\n"`` -> ``['86', '90']``); lines that are not X.Y are left out."""
    found = set()
    for line in text.splitlines():
        m = re.fullmatch(r"\s*(\d{1,2})\.(\d)\s*", line)
        if m:
            found.add(m.group(1) + m.group(2))
    return sorted(found, key=int)


def detect_gpu_archs(nvidia_smi="nvidia-smi"):
    """(architectures of this machine's GPUs, None), or ([], why none)."""
    try:
        r = subprocess.run([nvidia_smi] + NVIDIA_SMI_QUERY, capture_output=True, text=True,
                           timeout=60)
    except OSError:
        return [], "no nvidia-smi"
    except subprocess.TimeoutExpired:
        return [], "nvidia-smi did not answer"
    if r.returncode != 0:
        return [], "nvidia-smi failed (exit %d)" % r.returncode
    archs = parse_compute_caps(r.stdout)
    return (archs, None) if archs else ([], "nvidia-smi lists no GPU")


def choose_archs(environ, supported=None, detect=detect_gpu_archs):
    """(architectures, how they were chosen) for a build: CNNCUDA_CUDA_ARCH from
    ``environ`` when set, else the GPUs ``detect()`` finds, else the defaults."""
    value = switches.cuda_arch(environ)
    if value:
        return parse_arch_list(value, supported), "%s=%s" % (VARIABLE, value)
    found, why_not = detect()
    usable = [a for a in found if supported is None or a in supported]
    left_out = [a for a in found if a not in usable]
    note = (" (sm_%s left out: this nvcc cannot compile for it)" % ",".join(left_out)
            if left_out else "")
    if usable:
        return usable, "native: the GPUs nvidia-smi lists%s" % note
    if left_out:
        why_not = "nvidia-smi lists only GPUs this nvcc cannot compile for" + note
    return default_archs(supported), "default: %s" % why_not


def gencode_flags(archs):
    """nvcc's -gencode flags: machine code for each architecture, PTX for the newest."""
    flags = ["-gencode=arch=compute_%s,code=sm_%s" % (a, a) for a in archs]
    newest = max(archs, key=int)
    flags.append("-gencode=arch=compute_%s,code=compute_%s" % (newest, newest))
    return flags


def describe(archs):
    """The summary line's words for a list: ``sm_75,80,90 + PTX 90``."""
    return "sm_%s + PTX %s" % (",".join(archs), max(archs, key=int))

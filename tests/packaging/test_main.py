"""``python -m cnncuda``: the build's line and the engines, without pip -v."""
import os
import subprocess
import sys

import cnncuda


def test_python_m_cnncuda_tells_the_build_and_the_engines():
    env = dict(os.environ)  # the cnncuda this test imported, not another install
    root = os.path.dirname(os.path.dirname(os.path.abspath(cnncuda.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
    r = subprocess.run([sys.executable, "-m", "cnncuda"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    info = cnncuda.build_info()
    assert "build: " + info["summary"] in lines
    assert "engines built: " + " ".join(info["engines"]) in lines
    assert "engines that run here: " + " ".join(cnncuda.devices()) in lines
    for name in set(info["engines"]) - set(cnncuda.devices()):
        assert "  %s cannot: %s" % (name, cnncuda._C.engine_status(name)) in lines
    gpus = cnncuda.cuda_devices()
    if gpus:
        assert any(line.startswith("GPUs: 0: %s (compute capability" % gpus[0]) for line in lines)
    else:
        assert "GPUs: none visible" in lines

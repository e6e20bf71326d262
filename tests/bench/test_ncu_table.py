"""tools/ncu_table.py reads the CSV ncu writes over tools/ncu_steps.py (a row
per launch and metric, values with thousands separators, notes before the
header) and prints the second step's launches in order with their sum."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
          '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
          '"Metric Value"')


def row(i, name, metric, value):
    return ('"%d","1","python3","127.0.0.1","%s","1","14","(256, 1, 1)","(4, 1, 1)","0",'
            '"9.0","Command line profiler metrics","%s","","%s"' % (i, name, metric, value))


def test_the_second_step_in_order(tmp_path):
    kernels = ["void cnn_gemm::(anonymous namespace)::sgemm_tile<0, 0, 64, 64, 1, 0>(int, int)",
               "(anonymous namespace)::head_forward_kernel((anonymous namespace)::head_args)",
               "adam_kernel(unsigned long, const float *)"]
    lines = ["==WARNING== Note: Running with unmodified GPU clocks.", "==PROF== Connected", HEADER]
    for i in range(6):      # two steps of three launches
        lines.append(row(i, kernels[i % 3], "gpu__time_duration.sum", "%d,%03d" % (i + 1, 500)))
        lines.append(row(i, kernels[i % 3], "launch__grid_size", "1,352"))
    path = tmp_path / "steps.csv"
    path.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "ncu_table.py"), str(path)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    names = [line.split()[1] for line in out[:3]]
    assert names == ["sgemm_tile<0,", "head_forward_kernel", "adam_kernel"], out
    assert [line.split()[-1] for line in out[:3]] == ["4.5", "5.5", "6.5"], out
    assert out[0].split()[-2] == "1352", out
    assert out[3] == "3 launches, 16.5 us", out

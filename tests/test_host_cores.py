"""The cores a measured run kept busy, by process tree: a worker's CPU time with its pool's and
its helpers', the short-lived children it reaped included (`workers-scaling` says which worker
the host's busy cores went to)."""

from __future__ import annotations

import subprocess
import sys

from pipeline.bench.host_cores import tree_seconds

# burns 0.4 s of CPU, then a child that burns 0.4 s and is reaped, then waits to be read
BURNS = """
import subprocess, sys, time
def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
burn(0.4)
subprocess.run([sys.executable, "-c", "import time\\ns = time.process_time()\\nwhile time.process_time() - s < 0.4: pass"])
print("done", flush=True)
time.sleep(60)
"""


def test_a_trees_cpu_time_holds_its_reaped_childrens() -> None:
    process = subprocess.Popen([sys.executable, "-c", BURNS], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "done"
        spent = tree_seconds({"burner": process.pid, "gone": 2**22 + 7})
        assert spent["burner"] >= 0.75  # its own 0.4 s and its reaped child's 0.4 s (10-ms ticks)
        assert spent["gone"] == 0.0  # no such process: nothing
        assert tree_seconds({"burner": process.pid})["burner"] >= spent["burner"]  # only grows
    finally:
        process.kill()
        process.wait()

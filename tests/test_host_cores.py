"""The cores a measured run kept busy, by process tree: a worker's CPU time with its pool's and
its helpers', the short-lived children it reaped included (`workers-scaling` says which worker
the host's busy cores went to)."""

from __future__ import annotations

import os
import signal
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


# burns 0.3 s itself, reaps a child that burned 0.3 s, and keeps one that burned 0.4 s and waits
PARTS = """
import subprocess, sys, time
BURN = "import time\\ns = time.process_time()\\nwhile time.process_time() - s < {}: pass\\n"
def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
burn(0.3)
subprocess.run([sys.executable, "-c", BURN.format(0.3)])
kept = subprocess.Popen([sys.executable, "-c", BURN.format(0.4) + "print('kept', flush=True)\\ntime.sleep(60)"],
                        stdout=subprocess.PIPE, text=True)
kept.stdout.readline()
print("done", flush=True)
time.sleep(60)
"""


def test_a_runs_cpu_time_is_split_into_itself_what_it_reaped_and_each_child() -> None:
    from pipeline.bench.host_cores import parts_of

    process = subprocess.Popen([sys.executable, "-c", PARTS], stdout=subprocess.PIPE, text=True,
                               start_new_session=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "done"
        parts = parts_of(process.pid, lambda command: "kept" if "kept" in command else "other")()
        assert parts["itself"] >= 0.25 and parts["reaped by itself"] >= 0.25 and parts["kept"] >= 0.35
        assert set(parts) == {"itself", "reaped by itself", "kept"}
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the kept child too
        process.wait()

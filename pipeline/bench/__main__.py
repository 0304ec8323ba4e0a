"""``python -m pipeline.bench [COMMAND] ...``: the measurement tools (``commands.py``), with the
kernel choices set in the environment applied as `tts-jobs bench` applies them."""

import sys

from jobs.admin import run_benchmark

if __name__ == "__main__":
    sys.exit(run_benchmark(sys.argv[1:], prog="python -m pipeline.bench"))

"""``python -m pipeline.bench [COMMAND] ...``: the measurement tools (``commands.py``)."""

import sys

from pipeline.bench.commands import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

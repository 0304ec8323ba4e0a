"""``python -m pipeline.bench ...``: the engine benchmark, as ``tts-jobs bench ...`` runs it."""

import sys

from pipeline.bench.engine_bench import main

if __name__ == "__main__":
    main(sys.argv[1:])

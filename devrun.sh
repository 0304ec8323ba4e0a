python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .kit/wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore::SyntaxWarning
OUT0=$OUT
OUT=$OUT0/a python3 scripts/gpu_workers_scaling.py --phases one --format wav --sentences-per-book 10000 --chapters-per-book 40 --budget 280 2>&1 | tail -9

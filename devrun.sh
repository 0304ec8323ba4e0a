python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .kit/wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore::SyntaxWarning
OUT0=$OUT
python3 -c "import torch; print('priority range', torch.cuda.Stream.priority_range())"
OUT=$OUT0/hi TTS_JOBS_WAVEFORM_PRIORITY=-5 python3 scripts/gpu_workers_scaling.py --phases one --format wav --sentences-per-book 10000 --chapters-per-book 40 --budget 250 2>&1 | tail -4
OUT=$OUT0/lo python3 scripts/gpu_workers_scaling.py --phases one --format wav --sentences-per-book 10000 --chapters-per-book 40 --budget 250 2>&1 | tail -4
grep -h "device time" $OUT0/*/logs/*synth0.log | grep -v " 0 decode steps"

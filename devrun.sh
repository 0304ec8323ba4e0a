python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .kit/wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 PYTHONWARNINGS=ignore::SyntaxWarning
nproc; free -g | head -2; cat /sys/fs/cgroup/memory.max 2>/dev/null; sysctl vm.dirty_ratio vm.dirty_background_ratio vm.dirty_bytes 2>/dev/null; df -h /tmp | tail -1; mount | grep " /tmp \| / " | head -3
python3 scripts/bench_assembly.py --hours 14 --chapters 40 --formats wav --threads 16 8 4 2>&1 | grep -E "measured|wrote|assembly |cpu |---|generated"

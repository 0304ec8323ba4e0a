"""A decode step's record of its tokens and its counters as one kernel (pipeline/engine/
step_counters.py): under Triton's CPU interpreter it leaves every column, window and counter as
the PyTorch ops of ``decode_step.record_tokens`` and ``advance_counters`` leave them — rows that
choose EOS in one codebook, rows reaching their limit, rows done before, rows past their last
column — with and without the hidden states kept."""

from __future__ import annotations

from tests.test_engine_kernels import worst_error_under_the_interpreter

CHECK = """
import copy, types, torch
from pipeline.engine import step_counters
from pipeline.engine.decode_step import advance_counters, record_tokens

def slots(rows, steps, codebooks, width, keep, seed):
    g = torch.Generator().manual_seed(seed)
    return types.SimpleNamespace(
        shape=types.SimpleNamespace(steps=steps),
        tokens=torch.randint(0, 50, (rows, steps + 1, codebooks), generator=g),
        window=torch.randint(0, 50, (rows, codebooks, 16), generator=g),
        hidden=torch.randn(rows, width, generator=g).half(),
        hiddens=torch.randn(rows, steps + 1, width, generator=g).half() if keep else None,
        row_step=torch.randint(0, steps + 3, (rows,), generator=g),
        done=torch.rand(rows, generator=g) < 0.3,
        max_new=torch.randint(1, steps + 2, (rows,), generator=g),
        produced=torch.randint(0, steps, (rows,), generator=g),
        hit_limit=torch.rand(rows, generator=g) < 0.2)

worst = 0.0
for seed, keep, codebooks in ((0, True, 4), (1, False, 4), (2, True, 3), (3, False, 1)):
    eos = 49
    want = slots(37, 12, codebooks, 24, keep, seed)
    got = copy.deepcopy(want)
    b = 33  # the step's rows: the last four slots are untouched
    g = torch.Generator().manual_seed(seed + 10)
    new = torch.randint(40, 50, (b, codebooks), generator=g)  # EOS (49) in about one token in ten
    new[want.max_new[:b] <= want.row_step[:b] + 1] = 3  # some rows reach their limit without EOS
    step = want.row_step[:b]
    alive = ~want.done[:b]
    record_tokens(want, b, step, new)
    advance_counters(want, b, step, alive, new, eos)
    step_counters.record_and_advance(got, b, new, eos)
    assert int((new == eos).any(-1).sum()) > 0 and int(alive.sum()) < b
    for name in ("tokens", "window", "row_step", "done", "produced", "hit_limit", "hiddens"):
        a, c = getattr(want, name), getattr(got, name)
        if a is not None:
            worst = max(worst, float((a.double() - c.double()).abs().max()))
print(worst)
"""


def test_the_one_kernel_leaves_the_columns_windows_and_counters_the_ops_leave() -> None:
    assert worst_error_under_the_interpreter(CHECK) == 0.0

"""A decode step's sampling as one kernel (pipeline/engine/fused_sampling.py): under Triton's CPU
interpreter it draws the tokens the PyTorch ops of ``sampling.sample`` draw — greedy,
sampled and penalised pools, each row with its own temperature, top-p, top-k, seed and step, EOS
masked where a row may not end yet — and the engine runs it only where it was asked for."""

from __future__ import annotations

from tests.test_engine_kernels import compiled_for_hopper, worst_error_under_the_interpreter

CHECK = """
from tests.fused_sampling_cases import disagreements
differing, total = disagreements("cpu", vocab=100)
assert total == 4 * 3 * 6 * 2, total
print(differing / total)
"""


def test_the_fused_kernel_draws_the_tokens_the_pytorch_ops_draw() -> None:
    assert worst_error_under_the_interpreter(CHECK) == 0.0


def test_the_fused_kernel_compiles_for_hopper_without_spilling(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Triton's own ptxas, for sm_90 on any machine: on its warps a program keeps its tokens'
    logits in registers (a [vocabulary, window] comparison for the penalty held 255 and spilled at
    one or two warps, and took 81 us at 1,024 rows on an H100 on eight where two now take 31)."""
    code = compiled_for_hopper(tmp_path, "--sampling")["fused sampling"]
    assert code["warps"] <= 2 and code["spills"] == 0 and code["registers"] <= 96

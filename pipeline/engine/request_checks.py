"""What a synthesis request must hold before it reaches the device (each problem named)."""

from __future__ import annotations

from pipeline.types import SynthesisRequest


def check_request(index: int, r: SynthesisRequest, max_positions: int) -> None:
    """Raises ValueError naming request ``index`` and every problem with it."""
    problems = []
    if r.max_new_tokens < 1:
        problems.append(f"max_new_tokens={r.max_new_tokens} must be at least 1")
    if not 0 <= r.min_new_tokens <= r.max_new_tokens:
        problems.append(f"min_new_tokens={r.min_new_tokens} must be within [0, max_new_tokens]")
    if not r.temperature > 0:
        problems.append(f"temperature={r.temperature} must be > 0")
    if not 0 < r.top_p <= 1:
        problems.append(f"top_p={r.top_p} must be in (0, 1]")
    if r.top_k < 1:
        problems.append(f"top_k={r.top_k} must be at least 1")
    if not r.repetition_penalty > 0:
        problems.append(f"repetition_penalty={r.repetition_penalty} must be > 0")
    if r.max_new_tokens + 512 > max_positions:
        problems.append(f"max_new_tokens={r.max_new_tokens} leaves no room for the prompt "
                        f"in {max_positions} positions")
    if problems:
        raise ValueError(f"request {index} ({r.text[:30]!r}): " + "; ".join(problems))

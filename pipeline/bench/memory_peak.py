"""What held the GPU's memory at its peak: reads the allocator history the engine benchmark keeps
with ``--memory-history DIR`` (``torch.cuda.memory._snapshot``, pickled: every allocation and free
since the engine began to load, each with the Python frames that asked for it), replays it to the
moment the most was allocated, and prints what was alive then, grouped by the project's own frame
that asked for it (the innermost one in ``pipeline/`` or ``jobs/``), largest first.

    python -m pipeline.bench --synthetic full --device cuda ... --memory-history /tmp/m
    python -m pipeline.bench memory-peak /tmp/m/memory.pickle [--top 20]

The bench prints the same report when it writes the file. The file is large (hundreds of MB for
a full bench, too big to come back from a device call); it opens in PyTorch's viewer too.
"""

from __future__ import annotations

import argparse
import pickle
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

OWN_CODE = ("/pipeline/", "/jobs/")
ALLOCATED, FREED = "alloc", "free_completed"


@dataclass(frozen=True)
class Holder:
    frame: str  # file:line function, the project's innermost frame of the allocation
    bytes: int
    blocks: int


def peak_holders(events: Sequence[dict]) -> tuple[int, list[Holder]]:
    """The most bytes allocated at once in ``events`` (one device's trace), and what held them."""
    live: dict[int, dict] = {}
    current = peak = peak_at = 0
    for index, event in enumerate(events):
        current += _change(event, live)
        if current > peak:
            peak, peak_at = current, index
    live.clear()
    for event in events[:peak_at + 1]:
        _change(event, live)
    held: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for event in live.values():
        entry = held[_owner(event.get("frames") or [])]
        entry[0] += event["size"]
        entry[1] += 1
    holders = [Holder(frame, size, count) for frame, (size, count) in held.items()]
    return peak, sorted(holders, key=lambda h: h.bytes, reverse=True)


def _change(event: dict, live: dict[int, dict]) -> int:
    if event.get("action") == ALLOCATED:
        live[event["addr"]] = event
        return event["size"]
    if event.get("action") == FREED and event["addr"] in live:
        return -live.pop(event["addr"])["size"]
    return 0


def _owner(frames: Iterable[dict]) -> str:
    """The innermost frame of the project's own code (or the innermost of all, where none is)."""
    frames = list(frames)
    own = [f for f in frames if any(part in f.get("filename", "") for part in OWN_CODE)]
    frame = (own or frames or [{}])[0]
    if not frame:
        return "(no frames recorded)"
    path = frame.get("filename", "?")
    for part in OWN_CODE:
        if part in path:
            path = part.strip("/") + "/" + path.split(part, 1)[1]
            break
    return f"{path}:{frame.get('line', '?')} {frame.get('name', '?')}"


def report(snapshot: dict, top: int) -> list[str]:
    lines = []
    for device, events in enumerate(snapshot.get("device_traces", [])):
        if not events:
            continue
        peak, holders = peak_holders(events)
        lines.append(f"device {device}: peak {peak / 2**30:.2f} GiB allocated ({len(events)} events recorded)")
        lines += [f"  {h.bytes / 2**30:7.3f} GiB  {h.blocks:6d} blocks  {h.frame}" for h in holders[:top]]
    return lines or ["no allocations recorded (was the history kept on a GPU?)"]


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench memory-peak") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("snapshot", type=Path, help="memory.pickle from the bench's --memory-history DIR")
    parser.add_argument("--top", type=int, default=20, help="holders to print (default: 20)")
    args = parser.parse_args(argv)
    with open(args.snapshot, "rb") as handle:
        snapshot = pickle.load(handle)  # noqa: S301 - a file this project's bench wrote
    print("\n".join(report(snapshot, args.top)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Where a py-spy profile's samples went, per process, in a few lines instead of 25 MB.

Reads py-spy's raw collapsed stacks (``py-spy record --subprocesses --threads --format raw``:
one line per distinct stack, frames joined by ``;``, the sample count last) and prints, for each
process, how many samples fell inside frames matching ``--within`` and, of those, how many
also match each ``--count`` pattern (plain substrings of the stack line)::

    python -m pipeline.bench spy-summary spy.txt --within "run (pipeline/engine/generation.py" \\
        --count _harvest take_finished synchronize Popen triton_key

docs/gpu-kit.md has the py-spy command that records such a profile on the GPU machine.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path


def parse(line: str, by_thread: bool = False) -> tuple[str, str, int] | None:
    """(process, or process and thread; stack; samples) of one raw line; None for a line that is
    not a stack."""
    stack, _, count = line.rstrip("\n").rpartition(" ")
    if not stack or not count.isdigit():
        return None
    processes, thread = [], ""
    for frame in stack.split(";"):  # a child's stack starts with its parents' process frames
        if frame.startswith("process "):
            processes.append(frame)
        elif frame.startswith("thread "):
            thread = frame
        else:
            break
    owner = processes[-1] if processes else "-"
    return (f"{owner};{thread}" if by_thread else owner), stack, int(count)


def summarize(lines: list[str], within: str, patterns: list[str],
              by_thread: bool = False) -> dict[str, Counter[str]]:
    """Per process (or thread): samples in all, samples inside ``within`` and, of those, per
    pattern."""
    table: dict[str, Counter[str]] = {}
    for line in lines:
        parsed = parse(line, by_thread)
        if parsed is None:
            continue
        process, stack, samples = parsed
        counts = table.setdefault(process, Counter())
        counts["(all)"] += samples
        if within not in stack:
            continue
        counts["(within)"] += samples
        for pattern in patterns:
            if pattern in stack:
                counts[pattern] += samples
    return table


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench spy-summary") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", type=Path, help="py-spy raw output")
    parser.add_argument("--within", required=True, help="frame text that marks the stacks to look at")
    parser.add_argument("--count", nargs="*", default=[], help="frame texts to count inside them")
    parser.add_argument("--threads", action="store_true", help="a line per thread, not per process")
    args = parser.parse_args(argv)
    table = summarize(args.profile.read_text(errors="replace").splitlines(), args.within, args.count,
                      args.threads)
    for process, counts in sorted(table.items(), key=lambda item: -item[1]["(within)"]):
        inside = counts["(within)"]
        if not inside:
            continue
        print(f"{process[:140]}: {counts['(all)']} samples, {inside} inside {args.within!r}")
        for pattern in args.count:
            print(f"    {pattern:<40} {counts[pattern]:>7} ({counts[pattern] / inside:.0%})")
    return 0


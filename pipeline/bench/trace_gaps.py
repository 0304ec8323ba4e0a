"""Where a traced run's GPU time went and where it left the GPU idle: reads a torch.profiler
chrome trace (the bench's ``--trace DIR``) and prints each stream's busy time, the kernels that
took the most GPU time (by name, each stream's share: what a step is made of over the bench's
real mix of rows and lengths, graph replays included), the GPU's idle gaps (no kernel or copy on
any stream) with the work on either side and the host call under way meanwhile, and the CUDA
calls the host spent longest in.

    python -m pipeline.bench --synthetic full --device cuda --trace /tmp/t ...
    python -m pipeline.bench trace-gaps /tmp/t/trace-fp16-2048.json.gz [--top 20]
"""

from __future__ import annotations

import argparse
import bisect
import gzip
import json
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_CALLS = ("cuda_runtime", "cuda_driver")


def load(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as handle:
        return [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]


def merged(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for begin, end in sorted(spans):
        if out and begin <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((begin, end))
    return out


def short(name: str, width: int = 60) -> str:
    return name if len(name) <= width else name[: width - 3] + "..."


def report_gaps(title: str, busy: list[tuple[float, float]], work: list[dict],
                starts: list[float], host: list[dict], origin: float,
                args: argparse.Namespace) -> None:
    gaps = [(begin - end, end, begin) for (_, end), (begin, _) in pairwise(busy)
            if begin - end >= args.min_gap_us]
    print(f"\nIdle gaps of {title}: {len(gaps)} of >= {args.min_gap_us:.0f} µs, "
          f"{sum(g for g, _, _ in gaps) / 1e3:.1f} ms in all; the longest:")
    print("| at ms | gap µs | GPU work before | GPU work after | host call under way |")
    print("|---|---|---|---|---|")
    for gap, end, begin in sorted(gaps, reverse=True)[: args.top]:
        before = work[max(0, bisect.bisect_right(starts, end) - 1)]
        after = work[min(len(work) - 1, bisect.bisect_left(starts, begin))]
        during = [e for e in host if e["ts"] <= end + gap / 2 <= e["ts"] + e["dur"]]
        innermost = min(during, key=lambda e: e["dur"])["name"] if during else "-"
        print(f"| {(end - origin) / 1e3:.1f} | {gap:.0f} | {short(before['name'], 40)} "
              f"| {short(after['name'], 40)} | {short(innermost, 40)} |")


def report_kernels(work: list[dict], per_stream: dict[str, list[tuple[float, float]]], top: int) -> None:
    """GPU time by kernel name, largest first, as a share of its stream's busy time."""
    stream_busy = {stream: sum(e - b for b, e in merged(spans)) for stream, spans in per_stream.items()}
    totals: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    for e in work:
        key = (str(e.get("args", {}).get("stream", e.get("tid"))), e["name"])
        totals[key][0] += e["dur"]
        totals[key][1] += 1
    print("\nGPU time by kernel (share of its stream's busy time):")
    print("| stream | kernel | ms | % | launches | µs each |")
    print("|---|---|---|---|---|---|")
    for (stream, name), (dur, count) in sorted(totals.items(), key=lambda kv: -kv[1][0])[:top]:
        share = 100 * dur / stream_busy[stream] if stream_busy[stream] else 0.0
        print(f"| {stream} | {short(name, 70)} | {dur / 1e3:.1f} | {share:.1f} | {count} | {dur / count:.1f} |")


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench trace-gaps") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--min-gap-us", type=float, default=20.0)
    args = parser.parse_args(argv)
    events = load(args.trace)
    work = sorted((e for e in events if e.get("cat") in DEVICE_WORK), key=lambda e: e["ts"])
    if not work:
        print("no GPU work in the trace")
        return 1
    host = [e for e in events if e.get("cat") in HOST_CALLS + ("cpu_op",)]

    per_stream: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for e in work:
        per_stream[str(e.get("args", {}).get("stream", e.get("tid")))].append(
            (e["ts"], e["ts"] + e["dur"]))
    busy = merged([span for spans in per_stream.values() for span in spans])
    first, last = busy[0][0], busy[-1][1]
    busy_us = sum(end - begin for begin, end in busy)
    print(f"GPU span {(last - first) / 1e3:.1f} ms, busy (any stream) {busy_us / 1e3:.1f} ms, "
          f"idle {(last - first - busy_us) / 1e3:.1f} ms; {len(work)} kernels/copies")
    print("| stream | busy ms | kernels |")
    print("|---|---|---|")
    for stream, spans in sorted(per_stream.items(), key=lambda kv: -len(kv[1])):
        print(f"| {stream} | {sum(e - b for b, e in merged(spans)) / 1e3:.1f} | {len(spans)} |")

    report_kernels(work, per_stream, args.top)
    starts = [e["ts"] for e in work]
    report_gaps("the GPU (no stream busy)", busy, work, starts, host, first, args)
    main_stream = max(per_stream, key=lambda k: len(per_stream[k]))
    report_gaps(f"stream {main_stream} (the decode steps' stream)", merged(per_stream[main_stream]),
                work, starts, host, first, args)

    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for e in events:
        if e.get("cat") in HOST_CALLS:
            totals[e["name"]][0] += e["dur"]
            totals[e["name"]][1] += 1
    print("\nCUDA calls the host spent longest in:")
    print("| call | ms | calls |")
    print("|---|---|---|")
    for name, (dur, count) in sorted(totals.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"| {name} | {dur / 1e3:.1f} | {count} |")
    return 0


"""What the decode attention kernels compile to for the H100/H200 (sm_90), on any machine: Triton
compiles for a GPU it is not running on, with the ptxas and cuobjdump its wheel carries. Prints,
per kernel, the instructions of its loop over a slot's positions, per cached position, and the
registers a program holds (32 programs of one warp fit an SM at 64 or fewer):

    python -m pipeline.bench kernel-code             # single (int8 codes by bits), words, rope-words
    python -m pipeline.bench kernel-code --json F    # also as JSON
    python -m pipeline.bench kernel-code --stages 2  # the word kernels' loads pipelined
    python -m pipeline.bench kernel-code --waveform  # Decoder+Vocos's kernels: registers, spills
    python -m pipeline.bench kernel-code --sampling  # a decode step's fused sampling: the same

A count, not a clock: the H200 read the int8 cache at 2.28 TB/s where the fp16 one (16.7
instructions per position) read 3.76, so what each position costs to issue is what this tells.
Not under TRITON_INTERPRET=1 (the interpreter compiles nothing).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

TARGET = ("cuda", 90, 32)  # Hopper: the H100 and the H200
# The kernels take pointers, then the float ``scale``, then integer strides: every argument but
# ``scale`` is divisible by 16 as the engine launches them (Triton's launcher tells the compiler
# so; here the attributes say it).
KERNELS = ("single", "words", "rope-words", "words-on-sms")


@dataclass(frozen=True)
class KernelCode:
    kernel: str
    block: int  # positions per loop iteration
    loop_instructions: int
    per_position: float
    registers: int
    dp4a: int  # four-way byte dot products in the loop
    byte_loads: int  # one-byte loads in the loop (none when the cache is read vectorised)
    stages: int  # blocks in flight (2+: the loop software-pipelined)
    copies: int  # copies from global into shared memory in the loop (cp.async: a pipelined load)
    loads: int  # loads from global memory into registers in the loop (each holds up its block)
    spills: int  # loads and stores of spilled registers in the loop (local memory)
    top: dict[str, int]


def compile_kernel(kernel: str, block: int = 32, stages: int = 1) -> KernelCode:
    """``kernel``: "single" (decode_attention.py, int8 cache, codes by bits), "words"
    (word_attention.py), "rope-words" (the same with RoPE and the cache write inside) or
    "words-on-sms" (bench halves' persistent one on a few SMs), as the engine launches them
    (strides divisible by 16)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from pipeline.engine import decode_attention, word_attention

    # query, keys and values as words, their scales (kv_int8.SCALE_DTYPE), out, used, order, scale
    attention = ["*fp16", "*i32", "*i32", "*fp16", "*fp16", "*fp16", "*i32", "*i32", "fp32"]
    words = {"BLOCK_N": block, "HEAD_DIM": 64, "ASM": True, "STAGES": stages, "ORDERED": False,
             "PAIRED": word_attention.reads_scale_words(stages)}
    if kernel == "words":
        fn, types, const = word_attention._word_attention_kernel, attention, words
    elif kernel == "rope-words":  # qkv, residual, cos, sin, k, v, scales, out, write_at, used, order, scale, eps
        fn, types, const = (word_attention._rope_word_attention_kernel,
                            ["*fp16", "*fp16", "*fp32", "*fp32", *attention[1:6], "*i64", *attention[6:], "fp32"],
                            {"HEADS": 12, "BLOCK_X": 1024, **words})
    elif kernel == "words-on-sms":  # ..., out, used, the items' counter, scale, items, the SMs allowed
        from pipeline.bench.attention_on_sms import _word_attention_on_sms

        fn, types, const = (_word_attention_on_sms, [*attention, "i32", "*i32"],
                            {"HEADS": 12, **{k: v for k, v in words.items() if k != "ORDERED"}})
    elif kernel == "single":
        fn, types, const = (decode_attention._decode_attention_kernel,
                            ["*fp16", "*i8", "*i8", *attention[3:7], "fp32"],  # the cache read as bytes
                            {"QUANTIZED": True, "BLOCK_N": block, "HEAD_DIM": 64, "STAGES": 1, "INT8_BITS": True})
    else:
        raise ValueError(f"unknown kernel {kernel!r}: {', '.join(KERNELS)}")
    names = list(fn.arg_names)
    signature = {name: (types[i] if i < len(types) else "i32") for i, name in enumerate(names)}
    signature.update({name: "constexpr" for name in const})
    aligned = [i for i in range(len(names)) if types[i:i + 1] != ["fp32"] and names[i] not in const]
    source = ASTSource(fn=fn, signature=signature, constexprs=const,
                       attrs={(i,): [["tt.divisibility", 16]] for i in aligned})
    compiled = triton.compile(source, target=GPUTarget(*TARGET), options={"num_warps": 1, "num_stages": 1})
    sass, usage = disassembled(compiled.asm["cubin"])
    body = loop_body(sass)
    ops = Counter(re.sub(r"^@!?P\w+\s+", "", line).split()[0] for line in body)
    return KernelCode(kernel=kernel, block=block, loop_instructions=len(body),
                      per_position=round(len(body) / block, 2),
                      registers=int(re.search(r"REG:(\d+)", usage).group(1)),
                      dp4a=sum(n for op, n in ops.items() if op.startswith("IDP.4A")),
                      byte_loads=sum(n for op, n in ops.items() if op.startswith("LDG.E.U8") or op.startswith("LDG.E.S8")),
                      stages=stages, copies=sum(n for op, n in ops.items() if op.startswith("LDGSTS")),
                      loads=sum(n for op, n in ops.items() if op.startswith("LDG.")),
                      spills=sum(n for op, n in ops.items() if op.startswith(("LDL", "STL"))),
                      top=dict(ops.most_common(8)))


@dataclass(frozen=True)
class KernelRegisters:
    kernel: str
    warps: int
    registers: int
    spills: int  # local loads and stores: registers that did not fit


def compile_waveform_kernels() -> list[KernelRegisters]:
    """Decoder+Vocos's kernels (waveform_kernels.py) as the engine launches them: a block of 512
    channels, seven taps (the Decoder's dilation 2), and Vocos's overlap-add (n_fft 1024, hop 256)."""
    from pipeline.engine import waveform_kernels as wk

    return [
        compile_registers("dwconv + LayerNorm", wk._dwconv_norm_kernel,
                          {"TAPS": 7, "DILATION": 2, "BLOCK_T": wk.BLOCK_FRAMES, "BLOCK_C": 512}, wk.WARPS,
                          {"frames_ptr": "*i64"}),  # frames and weights half precision, each row's length int64
        compile_registers("overlap-add", wk._overlap_add_kernel,
                          {"N_FFT": 1024, "HOP": 256, "OVERLAP": 4, "BLOCK": wk.OVERLAP_BLOCK}, 4,
                          {"frames_ptr": "*fp32", "window_ptr": "*fp32", "valid_ptr": "*i64", "out_ptr": "*fp32"})]


def compile_sampling_kernel() -> KernelRegisters:
    """A decode step's fused sampling (fused_sampling.py) as the bench's pools launch it: ChatTTS's
    626 tokens, the repetition window, the k best among 32 candidates, on ``WARPS`` warps."""
    from pipeline.engine import fused_sampling
    from pipeline.engine.sampling import REPETITION_WINDOW

    pointers = {name: "*i64" for name in ("top_k_ptr", "seed_key_ptr", "row_step_ptr", "window_ptr",
                                          "cells_ptr", "tokens_ptr")}
    return compile_registers("fused sampling", fused_sampling._sample_kernel,
                             {"EOS": 625, "PADDED": 1024, "WINDOW": REPETITION_WINDOW, "GREEDY": False,
                              "PENALISED": True, "CANDIDATES": 32}, fused_sampling.WARPS,
                             {**pointers, "logits_ptr": "*fp16", "temperature_ptr": "*fp32", "top_p_ptr": "*fp32",
                              "penalty_ptr": "*fp32", "allow_ptr": "*i1"})


def compile_registers(name: str, fn, const: dict, warps: int, pointers: dict[str, str]) -> KernelRegisters:  # type: ignore[no-untyped-def]
    """``fn`` compiled for sm_90 at ``const`` on ``warps`` warps: its registers and spills. Pointers
    not in ``pointers`` are half precision; ``eps`` is a float, other scalars int32."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    names = list(fn.arg_names)
    signature = {n: "constexpr" if n in const else pointers.get(n, "*fp16") if n.endswith("_ptr")
                 else "fp32" if n == "eps" else "i32" for n in names}
    source = ASTSource(fn=fn, signature=signature, constexprs=const,
                       attrs={(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if n.endswith("_ptr")})
    compiled = triton.compile(source, target=GPUTarget(*TARGET), options={"num_warps": warps, "num_stages": 1})
    sass, usage = disassembled(compiled.asm["cubin"])
    return KernelRegisters(name, warps, int(re.search(r"REG:(\d+)", usage).group(1)),
                           sum(sass.count(op) for op in ("LDL", "STL")))


def disassembled(cubin: bytes) -> tuple[str, str]:
    """(the SASS listing, the resource usage) of a compiled kernel, by the wheel's cuobjdump."""
    import triton

    tool = str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "kernel.cubin"
        path.write_bytes(cubin)
        return tuple(subprocess.run([tool, flag, str(path)], capture_output=True, text=True, check=True).stdout
                     for flag in ("-sass", "-res-usage"))


def loop_body(sass: str) -> list[str]:
    """The instructions between the kernel's one backward branch and its target."""
    listing = [(int(m.group(1), 16), m.group(2)) for line in sass.splitlines()
               if (m := re.match(r"\s+/\*([0-9a-f]{4})\*/\s+(.*?)\s*;", line))]
    for address, text in listing:
        branch = re.search(r"BRA (0x[0-9a-f]+)", text)
        if branch and int(branch.group(1), 16) < address:
            start = int(branch.group(1), 16)
            return [text for at, text in listing if start <= at <= address]
    raise ValueError("no loop in this kernel's code")


def main(argv: list[str] | None = None, prog: str = "python -m pipeline.bench kernel-code") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernel", action="append", choices=KERNELS)
    parser.add_argument("--block", type=int, default=32, help="positions per loop iteration (default 32)")
    parser.add_argument("--stages", type=int, default=1,
                        help="blocks in flight of the word kernels (default 1, the plain loop; the engine runs 2: pipelined loads)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--waveform", action="store_true", help="Decoder+Vocos's kernels instead")
    parser.add_argument("--sampling", action="store_true", help="a decode step's fused sampling instead")
    args = parser.parse_args(argv)
    if args.waveform or args.sampling:
        # both flags: both groups, none left out silently
        codes = (compile_waveform_kernels() if args.waveform else []) + ([compile_sampling_kernel()] if args.sampling else [])
        print(f"registers and spills for sm_{TARGET[1]}:")
        print("| kernel | warps | registers | spills |")
        print("|---|---|---|---|")
        for code in codes:
            print(f"| {code.kernel} | {code.warps} | {code.registers} | {code.spills} |")
        if args.json:
            args.json.write_text(json.dumps([asdict(code) for code in codes], indent=1))
        return 0
    found = [compile_kernel(kernel, args.block, 1 if kernel == "single" else args.stages)
             for kernel in args.kernel or KERNELS]
    print(f"decode attention kernels for sm_{TARGET[1]}, int8 cache, head dim 64, one warp:")
    print("| kernel | block | stages | loop instructions | per position | registers | dp4a | byte loads "
          "| copies to shared | global loads | spills |")
    print("|" + "---|" * 11)
    for code in found:
        print(f"| {code.kernel} | {code.block} | {code.stages} | {code.loop_instructions} | {code.per_position} | "
              f"{code.registers} | {code.dp4a} | {code.byte_loads} | {code.copies} | {code.loads} | {code.spills} |")
    for code in found:
        print(f"{code.kernel}: {code.top}")
    if args.json:
        args.json.write_text(json.dumps([asdict(code) for code in found], indent=1))
    return 0

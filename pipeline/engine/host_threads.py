"""How the threads of a process that feeds a GPU share the interpreter.

The host queues a GPU's work op by op: a decode chunk's Decoder + Vocos is ~1,000 launches, a
prefill a few hundred, and PyTorch lets go of the interpreter lock inside every op. A thread of
pure Python beside them (the database, a stretch's assembly, a book being read) then takes the
lock at each op, and the launching thread gets it back only when that thread's switch interval
runs out: 5 ms by default, per op. Measured on the 2-core build machine, 3,000 small ops queued
from one thread took 6.5 ms alone and 1.4-1.8 s beside one busy Python thread; with a 0.3-ms
interval 56-64 ms, the busy thread ~15 % slower. In a synthesis process the launches are what
the GPU waits on. A full garbage collection holds the lock too, for as long as it walks every
object alive: 90-143 ms in a process that loaded the engine (~200,000 objects, the 2-core build
machine), and ``torch.cuda.graph`` runs one before every capture (11 for a batch's slots).
"""

from __future__ import annotations

import gc
import sys

LAUNCH_SWITCH_SECONDS = 0.0003  # the interpreter's switch interval in a process that feeds a GPU


def hand_over_promptly() -> None:
    """A thread waiting for the interpreter gets it within ``LAUNCH_SWITCH_SECONDS`` (never a
    longer interval than the process already has)."""
    if sys.getswitchinterval() > LAUNCH_SWITCH_SECONDS:
        sys.setswitchinterval(LAUNCH_SWITCH_SECONDS)


def spare_the_collector() -> None:
    """What is alive now (the imports, the loaded engine) out of the garbage collector's sight for
    good (``gc.freeze``): later collections walk only what was made since (~0 ms instead of
    90-143 ms). Call it once the engine is loaded; whatever it holds is never garbage."""
    gc.freeze()

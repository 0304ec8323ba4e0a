"""How a book is delivered: its pace and, for the refine pass, its style, as ChatTTS's prompt tokens.

ChatTTS takes the pace in the code prompt of every row (``[speed_N]``) and the style as levels in
the prompt of its refine pass (``[oral_N][laugh_N][break_N]``: filler words, laughter, pauses),
which then writes inline tokens (``[uv_break]``, ``[laugh]``) into the text. Without the refine
pass the text is read as written: no level, no inline token.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.errors import OptionError

SPEEDS = range(1, 10)  # slow to fast; ChatTTS's own prompt is [speed_5]
DEFAULT_SPEED = 5
# the refine pass's levels as ChatTTS trained them, each with the option that sets it
LEVELS = {"oral": ("--oral", range(0, 10)), "laugh": ("--laugh", range(0, 3)),
          "break": ("--pause", range(0, 8))}


def code_prompt(speed: int = DEFAULT_SPEED) -> str:
    """The prompt every row is spoken with."""
    return f"[speed_{speed}]"


def check_speed(speed: int) -> None:
    """Raises OptionError for a speed ChatTTS has no token for."""
    if speed not in SPEEDS:
        raise OptionError(f"--speed {speed}: give {SPEEDS.start} (slowest) to {SPEEDS.stop - 1} (fastest); "
                          f"{DEFAULT_SPEED} is ChatTTS's normal pace")


@dataclass(frozen=True)
class RefineLevels:
    """The refine pass's style levels; None leaves a level to the model."""

    oral: int | None = None  # filler words and spoken turns of phrase, 0-9
    laugh: int | None = None  # laughter, 0-2
    pause: int | None = None  # pauses, 0-7 (ChatTTS's [break_N])

    def __post_init__(self) -> None:
        for (level, (option, allowed)), value in zip(LEVELS.items(), (self.oral, self.laugh, self.pause)):
            if value is not None and value not in allowed:
                raise OptionError(f"{option} {value}: give {allowed.start} to {allowed.stop - 1} "
                                  f"(ChatTTS's [{level}_N])")

    @property
    def chosen(self) -> bool:
        return any(value is not None for value in (self.oral, self.laugh, self.pause))

    def prompt(self) -> str:
        """``[oral_2][laugh_0][break_6]`` for the levels chosen ('' for none: the model's own)."""
        values = zip(LEVELS, (self.oral, self.laugh, self.pause))
        return "".join(f"[{level}_{value}]" for level, value in values if value is not None)

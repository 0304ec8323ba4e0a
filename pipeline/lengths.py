"""How long a sentence may speak: GPT step limits from its text.

Random weights rarely choose EOS and real ChatTTS sometimes babbles to its 2048-token cap, so every
sentence gets a cap that scales with its text, and a floor that prevents clipped endings. Both
scale with the pace a job asks for (``[speed_N]``): a slow voice needs more steps for the same
text, and would otherwise be cut off at its cap.
"""

from __future__ import annotations

import unicodedata

from pipeline.delivery import DEFAULT_SPEED
from pipeline.types import GPT_STEPS_PER_SECOND

# Seconds of speech per character: a CJK character is a syllable (~0.22 s at ChatTTS's speed 5),
# a Latin letter about a fifteenth of a second (~13 letters per second, spaces included).
_CJK_SECONDS = 0.22
_OTHER_SECONDS = 0.075
MAX_TOKENS_CAP = 2048  # upstream's own hard cap
# How long speech at each [speed_N] lasts against speed 5. Generous on the slow side, where an
# estimate too short cuts speech off at the cap; on the fast side a long estimate only raises the
# floor a little (it stays well under the speech a fast voice makes).
SPEED_FACTORS = {1: 1.6, 2: 1.45, 3: 1.3, 4: 1.15, 5: 1.0, 6: 0.92, 7: 0.85, 8: 0.8, 9: 0.75}


def estimated_seconds(text: str, speed: int = DEFAULT_SPEED) -> float:
    """Expected duration of ``text`` spoken at ``speed`` (5: ChatTTS's normal pace)."""
    seconds = _seconds_at_normal_speed(text)
    return seconds if speed == DEFAULT_SPEED else seconds * SPEED_FACTORS[speed]


def _seconds_at_normal_speed(text: str) -> float:
    if text.isascii():  # most sentences: every character counts the same, or nothing
        return _ascii_seconds(len(text) - sum(map(text.count, _SILENT_ASCII)))
    seconds = 0.0
    known = _SECONDS_PER_CHAR
    for ch in text:
        step = known.get(ch)
        if step is None:
            step = known[ch] = _seconds_of(ch)
        seconds += step  # summed in text order, as always: the limits stay bit-identical
    return seconds


# Each character's share, looked up once: ingest estimates every sentence of a book, and asking
# unicodedata for every character took a third of ingest (0.17 s of a 5,300-sentence book).
_SECONDS_PER_CHAR: dict[str, float] = {}


_SILENT_ASCII = "\t\n\v\f\r\x1c\x1d\x1e\x1f"  # ASCII whitespace other than the space: no time


def _ascii_seconds(characters: int) -> float:
    """What the loop sums for ``characters`` timed ASCII characters, bit for bit: the same float
    additions in the same order (adding the silent ones' 0.0 changes nothing), read from a table
    of running sums instead of one dictionary lookup per character (a fifth of ingest)."""
    while len(_ASCII_SUMS) <= characters:
        _ASCII_SUMS.append(_ASCII_SUMS[-1] + _OTHER_SECONDS)
    return _ASCII_SUMS[characters]


_ASCII_SUMS = [0.0]  # _ASCII_SUMS[k]: 0.0 + _OTHER_SECONDS + ... (k times), grown on demand


def _seconds_of(ch: str) -> float:
    if _is_cjk(ch):
        return _CJK_SECONDS
    return _OTHER_SECONDS if not ch.isspace() or ch == " " else 0.0


SLACK = 2.0  # the cap is this many times the expected length...
FLOOR_SECONDS = 2.0  # ...but at least this long
MIN_FRACTION = 0.4  # EOS is masked below this fraction of the expected length


def max_new_tokens(text: str, slack: float = SLACK, floor_seconds: float = FLOOR_SECONDS,
                   speed: int = DEFAULT_SPEED) -> int:
    """The cap: ``slack`` times the expected length, at least ``floor_seconds``, at most 2048."""
    return _cap_for(estimated_seconds(text, speed), slack, floor_seconds)


def min_new_tokens(text: str, fraction: float = MIN_FRACTION, speed: int = DEFAULT_SPEED) -> int:
    """The floor below which EOS is masked: a fraction of the expected length."""
    return _floor_for(estimated_seconds(text, speed), fraction)


def token_limits(text: str, speed: int = DEFAULT_SPEED) -> tuple[int, int]:
    """(min_new_tokens, max_new_tokens) of ``text`` at ``speed`` with the defaults, reading the
    text once (ingest computes both for every sentence of a book)."""
    seconds = estimated_seconds(text, speed)
    return _floor_for(seconds, MIN_FRACTION), _cap_for(seconds, SLACK, FLOOR_SECONDS)


def _cap_for(seconds: float, slack: float, floor_seconds: float) -> int:
    return min(MAX_TOKENS_CAP, round(max(seconds * slack, floor_seconds) * GPT_STEPS_PER_SECOND))


def _floor_for(seconds: float, fraction: float) -> int:
    return int(seconds * fraction * GPT_STEPS_PER_SECOND)


def _is_cjk(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F") and ch.isalnum()

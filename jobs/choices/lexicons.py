"""The user's pronunciation lexicons: ``lexicon.txt`` in the data directory for every book, and a
``--lexicon FILE`` for this one (it wins where both spell a word). Their entries are read when a
job is made and stored with it: a file changed or removed later does not change the job, so a
retry or a resume speaks the same words. The format is in ``pipeline/text/lexicon.py``."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from jobs.choices.options import JobOptions
from pipeline.errors import OptionError
from pipeline.text.lexicon import Entry, Lexicon, parse_lexicon

DEFAULT_LEXICON = "lexicon.txt"  # in the data directory: every book's


def with_user_lexicon(options: JobOptions, data_dir: Path, lexicon: Path | None = None) -> JobOptions:
    """``options`` with the entries of the data directory's lexicon and of ``lexicon``.

    Raises:
        OptionError: ``lexicon`` cannot be read, or a line of either file is no entry.
    """
    groups: list[tuple[Entry, ...]] = []
    files: list[str] = []
    default = data_dir / DEFAULT_LEXICON
    if default.is_file():
        groups.append(_read(default, "the data directory's lexicon"))
        files.append(str(default))
    if lexicon is not None:
        groups.append(_read(lexicon, "--lexicon"))
        files.append(str(lexicon.resolve()))
    if not groups:
        return options
    return replace(options, lexicon=Lexicon.merged(*groups).entries, lexicon_files=tuple(files))


def _read(path: Path, what: str) -> tuple[Entry, ...]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise OptionError(f"{what} {path}: no such file (check the path)") from None
    except UnicodeDecodeError:
        raise OptionError(f"{what} {path}: not UTF-8 text (save it as UTF-8)") from None
    except OSError as exc:
        raise OptionError(f"{what} {path}: cannot be read ({exc.strerror})") from None
    return parse_lexicon(text, str(path))

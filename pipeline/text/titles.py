"""A chapter title in two languages, announced one language at a time.

A book that numbers its chapters in English and titles them in Chinese ('Chapter 2: 第二章 兔子洞')
has a title no single language reads: read as one sentence, Chinese wins and the listener hears
'Chapter 二：第二章兔子洞'. Such a title is cut where its language changes, and each part is read in
its own: 'Chapter two:' then '第二章兔子洞'. A title is cut only between words (at a space or a
colon, comma or semicolon, full width or not), and only at an English phrase of two or more words
or numbers: a lone Latin word among Chinese ('第五章 Python 入门') is a name, read with the Chinese
around it, as ChatTTS reads it in a sentence.
"""

from __future__ import annotations

import re

from pipeline.text.language import paragraph_language
from pipeline.text.marks import CJK_RANGE

_WORD = re.compile(r"[^\s:：;；,，]+[:：;；,，]*|[:：;；,，]+")
_CJK = re.compile(f"[{CJK_RANGE}]")
_LATIN = re.compile(r"[^\W\d_]")  # a letter; CJK ones are told apart by _CJK


def title_parts(title: str) -> list[tuple[str, str]]:
    """``title`` as (text, language) parts in reading order: one part with language '' (the
    sentence decides, as for any text) unless the title holds both an English phrase and Chinese;
    then parts of 'en' and 'zh' that together are the whole title."""
    words = [(match.start(), match.end(), _language(match.group(0))) for match in _WORD.finditer(title)]
    groups: list[list[tuple[int, int, str]]] = []  # runs of words of one language, neutral ones joined
    for start, end, language in words:
        if groups and language in ("", groups[-1][0][2]):
            groups[-1].append((start, end, groups[-1][0][2]))
        elif groups and groups[-1][0][2] == "":  # a title opening with numbers: they join the first words
            groups[-1] = [(s, e, language) for s, e, _ in groups[-1]] + [(start, end, language)]
        else:
            groups.append([(start, end, language)])
    groups = _names_joined(groups)
    if {group[0][2] for group in groups} != {"en", "zh"}:
        return [(title, "")]
    return [(title[group[0][0]:group[-1][1]], group[0][2]) for group in groups]


def _names_joined(groups: list[list[tuple[int, int, str]]]) -> list[list[tuple[int, int, str]]]:
    """An English run of one word is a name or label: it joins the Chinese before (or after) it."""
    joined: list[list[tuple[int, int, str]]] = []
    for group in groups:
        lone = group[0][2] == "en" and len(group) < 2
        if joined and (lone or group[0][2] == joined[-1][0][2]):
            language = joined[-1][0][2]
            joined[-1] = joined[-1] + [(s, e, language) for s, e, _ in group]
        elif joined and joined[-1][0][2] == "en" and len(joined[-1]) < 2:
            joined[-1] = [(s, e, group[0][2]) for s, e, _ in joined[-1]] + group
        else:
            joined.append(group)
    return joined


def _language(word: str) -> str:
    """'zh' or 'en' for a word of Chinese or of Latin letters ('' for numbers and marks); a word
    holding both is judged as a sentence is."""
    chinese, latin = bool(_CJK.search(word)), bool(_LATIN.search(_CJK.sub("", word)))
    if chinese and latin:
        return paragraph_language(word) or "zh"
    return "zh" if chinese else "en" if latin else ""

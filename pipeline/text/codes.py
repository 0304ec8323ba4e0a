"""Digit strings that are no quantity: phone numbers, ISBNs, postcodes, serial and model numbers.

A listener hears them digit by digit, in groups with a short pause between (``five five five, one two
three, four five six seven``), never as "five hundred fifty five million...". A digit string is a code
when a word before it says so (``ISBN``, ``ZIP``, ``phone``, ``serial``, ``model``, ``电话``, ``邮编``,
``型号``...), when its shape does (hyphenated groups, a leading zero, a Chinese mobile number, nine
or more digits that are no round figure, a US state and its ZIP), or when it is written against letters
as model names are (``XJ-9000``, ``SN20231234``).
"""

from __future__ import annotations

import re

from pipeline.text.marks import BREAK_MARK, DASH_MARK
from pipeline.text.numbers import digit_by_digit

# Words that make the digits after them a code; nouns that do with 'number' or 'No.' after them.
_CODE_WORDS = (
    "zip", "zip code", "zipcode", "postcode", "post code", "postal code", "isbn", "isbn-10", "isbn-13",
    "issn", "phone", "telephone", "tel", "fax", "mobile", "cell", "call", "dial", "serial", "s/n", "sn",
    "model", "sku", "pin",
    "电话", "电话号码", "手机", "手机号", "手机号码", "号码", "邮编", "邮政编码", "编号", "序列号", "型号",
    "工号", "学号", "账号", "帐号", "卡号", "订单号", "单号", "身份证", "身份证号", "证件号", "车牌",
    "车牌号", "验证码", "书号", "统一书号",
)  # fmt: skip
_CODE_NOUNS = ("part", "order", "tracking", "account", "acct", "invoice", "ticket", "passport", "license",
               "licence", "registration")  # fmt: skip
_NUMBER_WORDS = ("number", "no", "num", "nr")
_GROUPS = "0123456789 -" + BREAK_MARK + DASH_MARK  # a code's earlier groups, between its word and its digits
_LOOK_BACK = 48
_US_STATE_ZIP = re.compile(r"\b[A-Z]{2} $")
_CHINESE_MOBILE = re.compile(r"1[3-9]\d{9}")
_PHONE_AFTER_AREA_CODE = re.compile(rf" *{BREAK_MARK} *\d{{3}}[- ]\d{{4}}(?!\d)")  # (555) 123-4567
_LETTER_BEFORE = re.compile(r"[A-Za-z]-?$")


def in_code_context(text: str, start: int) -> bool:
    """Whether the digits at ``start`` follow a word that makes them a code: 'ZIP 95014', 'Serial No.
    4417', 'model XJ-9000', '电话：010-1234', 'phone (555) 123-4567'.

    Read from right to left, without a regex: most numbers follow no such word, and this runs for
    each of them.
    """
    low = max(0, start - _LOOK_BACK)
    end = _back_over(text, start, low, _GROUPS)
    ends = [end]
    letters = end
    while letters > low and end - letters < 6 and text[letters - 1].isascii() and text[letters - 1].isalpha():
        letters -= 1
    if letters < end:  # a model's letters before its digits: 'XJ-', 'A'
        ends.append(_back_over(text, letters, low, " "))
    for candidate in ends:
        word_end = _back_over(text, candidate, low, " :：")
        if text[word_end - 1 : word_end] in ("是", "为", "為"):
            word_end = _back_over(text, word_end - 1, low, " :：")
        word_end = _back_over(text, word_end, low, " .:：#")
        if _word_before(text, word_end, low, _CODE_WORDS):
            return True
        number_word = _word_before(text, word_end, low, _NUMBER_WORDS)
        if not number_word:
            continue
        noun_end = _back_over(text, number_word, low, " .:：#")
        if _word_before(text, noun_end, low, _CODE_WORDS + _CODE_NOUNS):
            return True
    return False


def _back_over(text: str, end: int, low: int, characters: str) -> int:
    while end > low and text[end - 1] in characters:
        end -= 1
    return end


def _word_before(text: str, end: int, low: int, words: tuple[str, ...]) -> int:
    """Where one of ``words`` ending at ``end`` begins (a whole word, case aside), else 0."""
    tail = text[max(low, end - 16) : end].lower()
    if not tail.endswith(words):
        return 0
    for word in words:
        begin = end - len(word)
        glued = word.isascii() and begin > 0 and text[begin - 1].isascii() and text[begin - 1].isalpha()
        if tail.endswith(word) and not glued:  # 'call', but not 'recall'
            return max(begin, 1)
    return 0


def is_code(text: str, start: int, digits: str) -> bool:
    """Whether the bare digit string ``digits`` at ``start`` is read digit by digit."""
    if in_code_context(text, start):
        return True
    if len(digits) >= 4 and _LETTER_BEFORE.search(text, max(0, start - 2), start):
        return True  # a model or serial number: XJ-9000, SN20231234
    if len(digits) == 5 and _US_STATE_ZIP.search(text, max(0, start - 3), start):
        return True  # Cupertino, CA 95014
    if len(digits) == 11 and _CHINESE_MOBILE.fullmatch(digits):
        return True
    if len(digits) == 3 and _PHONE_AFTER_AREA_CODE.match(text, start + 3):
        return True
    return len(digits) >= 9 and not digits.endswith("000")


def international_phone(match: re.Match[str], language: str) -> str:
    """'+44 20 7946 0958' → 'plus four four, two zero, seven nine four six, zero nine five eight'."""
    groups = re.findall(r"\d+", match.group(0))
    return ("加" if language == "zh" else "plus ") + spoken_code(groups, language)


def spoken_code(groups: list[str], language: str) -> str:
    """Each group digit by digit, a pause between groups; a long group split as a phone number is."""
    parts = [part for group in groups for part in _split(group)]
    joiner = "，" if language == "zh" else ", "
    return joiner.join(digit_by_digit(part, language) for part in parts)


def _split(group: str) -> list[str]:
    """'13812345678' → '138', '1234', '5678': groups of three or four, the longer ones last; up to
    six digits (a postcode) are one group."""
    if len(group) <= 6:
        return [group]
    count = -(-len(group) // 4)
    size, longer = divmod(len(group), count)
    sizes = [size] * (count - longer) + [size + 1] * longer
    parts, at = [], 0
    for length in sizes:
        parts.append(group[at : at + length])
        at += length
    return parts

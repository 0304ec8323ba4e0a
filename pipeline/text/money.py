"""Money as words: $5, US$3.50, €2 million, 20 USD, ¥100."""

from __future__ import annotations

import re

from pipeline.text.numbers import amount, en_cardinal

CURRENCY_SIGNS = "$€£¥₩₹₽"
_CURRENCIES = {  # symbol or code -> (English singular, plural, minor unit singular, plural, Chinese)
    "$": ("dollar", "dollars", "cent", "cents", "美元"),
    "US$": ("US dollar", "US dollars", "cent", "cents", "美元"),
    "USD": ("US dollar", "US dollars", "cent", "cents", "美元"),
    "HK$": ("Hong Kong dollar", "Hong Kong dollars", "cent", "cents", "港元"),
    "€": ("euro", "euros", "cent", "cents", "欧元"),
    "EUR": ("euro", "euros", "cent", "cents", "欧元"),
    "£": ("pound", "pounds", "penny", "pence", "英镑"),
    "GBP": ("pound", "pounds", "penny", "pence", "英镑"),
    "¥": ("yen", "yen", "", "", "元"),
    "JPY": ("yen", "yen", "", "", "日元"),
    "CNY": ("yuan", "yuan", "", "", "元"),
    "RMB": ("yuan", "yuan", "", "", "元"),
    "₩": ("won", "won", "", "", "韩元"),
    "₹": ("rupee", "rupees", "", "", "卢比"),
    "₽": ("ruble", "rubles", "", "", "卢布"),
}
_SCALE_WORDS = {  # written scale -> (English, Chinese)
    "k": ("thousand", "千"),
    "thousand": ("thousand", "千"),
    "m": ("million", "百万"),
    "million": ("million", "百万"),
    "bn": ("billion", "十亿"),
    "b": ("billion", "十亿"),
    "billion": ("billion", "十亿"),
    "trillion": ("trillion", "万亿"),
    "万": ("ten thousand", "万"),
    "亿": ("hundred million", "亿"),
}


def money(match: re.Match[str], language: str) -> str:
    """A currency sign (with 'US' or 'HK' before it), the amount, and a scale word after it."""
    symbol = (match.group(1) or "") + match.group(2)
    symbol = symbol if symbol in _CURRENCIES else match.group(2)
    return _money_words(symbol, match.group(3), match.group(4), language)


def money_code(match: re.Match[str], language: str) -> str:
    """The amount, then a currency code: '20 USD'."""
    return _money_words(match.group(2).upper(), match.group(1), None, language)


def _money_words(symbol: str, digits: str, scale: str | None, language: str) -> str:
    singular, plural, minor, minors, chinese = _CURRENCIES[symbol]
    scale_words = _SCALE_WORDS.get(scale.lower() if scale and scale.isascii() else scale or "")
    if language == "zh":
        scale_word = scale_words[1] if scale_words else ""
        return f"{amount(digits, 'zh')}{scale_word}{chinese}"
    if scale_words:
        return f"{amount(digits, 'en')} {scale_words[0]} {plural}"
    integer, _, fraction = digits.replace(",", "").partition(".")
    whole = int(integer or 0)
    if minor and len(fraction) == 2:
        cents = int(fraction)
        spoken = f"{en_cardinal(whole)} {singular if whole == 1 else plural}"
        if cents:
            spoken += f" and {en_cardinal(cents)} {minor if cents == 1 else minors}"
        return spoken
    unit = singular if digits == "1" else plural
    return f"{amount(digits, 'en')} {unit}"

"""Links and e-mail addresses: read as their site or address ('example dot com'), or dropped."""

from __future__ import annotations

import re

from pipeline.text.drops import Drops
from pipeline.text.marks import SEPARATOR

_URL = re.compile(
    rf"\b(?:(?:https?|ftp)://|www\.)[^\s<>\"'，。！？、；：）」』】{SEPARATOR}]+", re.IGNORECASE
)
# Not \b: a Chinese character counts as a word character, and '邮箱是a@b.com' holds an address.
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+(?![A-Za-z0-9-])"
)


def read_links(text: str, read_urls: str, drops: Drops) -> str:
    """E-mail addresses spoken; links spoken as their site ('domain') or left out and counted ('drop')."""
    if "@" in text:
        text = _EMAIL.sub(lambda m: f" {spoken_address(m.group(0))} ", text)
    if "://" in text or "www." in text.lower():
        text = _URL.sub(lambda m: _spoken_url(m.group(0), read_urls, drops), text)
    return text


def spoken_address(address: str) -> str:
    """'john.doe@example.com' → 'john dot doe at example dot com' (digits are spelled later)."""
    address = address.replace("@", " at ").replace(".", " dot ").replace("_", " underscore ")
    return " ".join(address.replace("-", " ").split())


def _spoken_url(url: str, read_urls: str, drops: Drops) -> str:
    if read_urls == "drop":
        drops.links += 1
        return " "
    host = re.sub(r"^(?:[a-z]+://)?(?:www\.)?", "", url.rstrip(".,;:!?)"), flags=re.IGNORECASE)
    host = re.split(r"[/?#:]", host, maxsplit=1)[0]
    return f" {spoken_address(host)} "

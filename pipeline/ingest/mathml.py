"""What a MathML formula says: its text alternative, or its own markup where that is simple.

Many converted textbooks give every formula the same placeholder alt text ("Alternative text not
available", "image", "formula", a file name): reading it aloud says nothing, thousands of times. A
placeholder counts as no text. A formula without text is read from its markup when that is simple
enough to speak (letters, numbers, operators, powers of two and three, fractions, square roots, a
few tokens in all); otherwise the reader stands in for it once per run of formulas.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lxml import etree

from pipeline.ingest.xmlsafe import local_name

ALTTEXT, MARKUP, NONE = "alttext", "markup", ""

_PLACEHOLDER = re.compile(
    r"^(?:|alt|alt text|alternative text|(?:no )?alt(?:ernative)? text(?: is)? (?:not )?(?:available|provided)"
    r"|image|img|graphic|picture|figure|equation|formula|math|mathml|math formula|inline formula"
    r"|display formula|description|placeholder|todo|null|none|n/?a|untitled"
    r"|[\w\-. ]+\.(?:png|jpe?g|gif|svg|webp|bmp|tiff?|eps|wmf|mml)"
    r"|图|图片|图像|公式|数学公式|无替代文本|替代文本不可用)$",
    re.IGNORECASE,
)
_MAX_TOKENS = 15  # more than this is no formula a listener follows by ear
_GREEK = {
    "α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "epsilon", "ϵ": "epsilon", "ζ": "zeta",
    "η": "eta", "θ": "theta", "ι": "iota", "κ": "kappa", "λ": "lambda", "μ": "mu", "ν": "nu", "ξ": "xi",
    "π": "pi", "ρ": "rho", "σ": "sigma", "τ": "tau", "υ": "upsilon", "φ": "phi", "ϕ": "phi", "χ": "chi",
    "ψ": "psi", "ω": "omega", "Γ": "gamma", "Δ": "delta", "Θ": "theta", "Λ": "lambda", "Π": "pi",
    "Σ": "sigma", "Φ": "phi", "Ψ": "psi", "Ω": "omega",
}  # fmt: skip
_MINUS = {"en": " minus ", "zh": "减"}
_OPERATORS = {"−": "-", "⋅": "×", "·": "×", "∗": "×", "*": "×", "⁄": "÷", "/": "÷", "∕": "÷"}
_SILENT_OPERATORS = frozenset("()[]{}⁡\u2061\u2062\u2063,")  # brackets and invisible operators
_WRAPPERS = frozenset(("mrow", "mstyle", "mpadded", "mphantom", "menclose", "math"))
_TOKENS = frozenset(("mi", "mn", "mo", "mtext"))
_TEX_COMMANDS = {
    "times": "×", "cdot": "×", "div": "÷", "pm": "±", "leq": "≤", "le": "≤", "geq": "≥", "ge": "≥",
    "neq": "≠", "ne": "≠", "approx": "≈", "infty": "∞", "sqrt": "√", "lt": "<", "gt": ">",
}  # fmt: skip
_TEX_SPOKEN = frozenset(
    "sin cos tan log ln exp min max lim det gcd mod alpha beta gamma delta epsilon zeta eta theta iota kappa "
    "lambda mu nu xi pi rho sigma tau upsilon phi chi psi omega Gamma Delta Theta Lambda Pi Sigma Phi Psi "
    "Omega".split()
)  # read as written: function names and Greek letters
_TEX_SILENT = frozenset(
    "left right mathrm mathit mathbf mathsf text textrm operatorname displaystyle quad qquad".split()
)
_TEX_KNOWN = frozenset(_TEX_COMMANDS) | _TEX_SPOKEN | _TEX_SILENT
_TEX_SPACING = re.compile(
    r"\\[,;:! ]|\b(?:left|right|mathrm|mathit|mathbf|mathsf|text|textrm|operatorname"
    r"|displaystyle|quad|qquad)\b"
)
_TEX_FRACTION = re.compile(r"\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_TEX_COMMAND = re.compile(r"\\([A-Za-z]+)")
_TEX_POWER = re.compile(r"\^\s*(?:\{\s*([23])\s*\}|([23]))(?![0-9])")


class _NotSimple(Exception):
    """The markup holds more than a listener can follow: tables, integrals, long formulas."""


@dataclass(frozen=True)
class Formula:
    """What a formula says, and where that comes from: ``ALTTEXT``, ``MARKUP`` or ``NONE``."""

    text: str
    source: str
    placeholder: bool = False  # its alt text was a placeholder, and was not read


def read_formula(element: etree._Element, language: str = "") -> Formula:
    """The words of a ``<math>`` element: its alt text when that says something, else its markup
    when that is simple, else nothing (the reader stands in for it)."""
    alt = _alternative_text(element)
    placeholder = bool(alt) and is_placeholder(alt)
    readable = _readable_tex(alt) if alt and not placeholder else ""
    if readable:
        return Formula(readable, ALTTEXT)
    spoken = markup_text(element, language)  # no alt text, a placeholder, or TeX no listener follows
    return Formula(spoken, MARKUP if spoken else NONE, placeholder)


def is_placeholder(text: str) -> bool:
    """Whether an alt text only says that there is no alt text ('Alternative text not available')."""
    return bool(_PLACEHOLDER.match(" ".join(text.split()).strip(" .:;-_()[]")))


def markup_text(element: etree._Element, language: str = "") -> str:
    """'x² + y² = z²' for the MathML of that formula; '' when it is not simple enough to speak."""
    words: list[str] = []
    try:
        _read(element, words, language)
    except _NotSimple:
        return ""
    if not words or len(words) > _MAX_TOKENS:
        return ""
    return " ".join(" ".join(words).split())


def _read(element: etree._Element, words: list[str], language: str) -> None:
    name = local_name(element)
    children = [child for child in element if local_name(child) not in ("annotation", "annotation-xml")]
    if name in _TOKENS:
        _token(name, "".join(element.itertext()).strip(), words, language)
    elif name in _WRAPPERS or name == "semantics":
        for child in children[:1] if name == "semantics" else children:
            _read(child, words, language)
    elif name == "msup" and len(children) == 2:
        before = len(words)
        _read(children[0], words, language)
        power = "".join(children[1].itertext()).strip()
        if power not in ("2", "3") or len(words) != before + 1:  # '(a + b)²' is no longer simple
            raise _NotSimple
        words[-1:] = [(words[-1] if words else "") + ("²" if power == "2" else "³")]
    elif name == "msub" and len(children) == 2:
        _read(children[0], words, language)
        _read(children[1], words, language)
    elif name == "mfrac" and len(children) == 2:
        _read(children[0], words, language)
        words.append("÷")
        _read(children[1], words, language)
    elif name == "msqrt":
        words.append("√")
        for child in children:
            _read(child, words, language)
    else:
        raise _NotSimple
    if len(words) > _MAX_TOKENS:
        raise _NotSimple


def _token(name: str, text: str, words: list[str], language: str) -> None:
    if not text:
        return
    if name == "mo":
        if text in _SILENT_OPERATORS:
            return
        if text in ("-", "−"):
            words.append(_MINUS["zh" if language.lower().startswith("zh") else "en"].strip())
            return
        words.append(_OPERATORS.get(text, text))
        return
    if any(ch in _GREEK for ch in text):
        text = " ".join(_GREEK.get(ch, ch) for ch in text)
    words.append(text)


def _alternative_text(element: etree._Element) -> str:
    alt = element.get("alttext") or element.get("aria-label") or element.get("alt") or ""
    if not alt.strip():
        for item in element.iter():
            if local_name(item) == "annotation" and (item.get("encoding") or "").lower() == "text/plain":
                alt = "".join(item.itertext())
                break
    return " ".join(alt.split())


def _readable_tex(alt: str) -> str:
    """TeX in an alt text made readable where it is simple (fractions, powers of two and three,
    relations, Greek letters, function names); the rest is left to the text stage. '' for TeX that
    is not simple (integrals, sums, matrices: '\\int_0^1', '\\begin{pmatrix}')."""
    if "\\" in alt or "^" in alt or "{" in alt:
        alt = _TEX_FRACTION.sub(r"\1 ÷ \2", alt)
        alt = _TEX_POWER.sub(lambda m: "²" if (m.group(1) or m.group(2)) == "2" else "³", alt)
        if any(command not in _TEX_KNOWN for command in _TEX_COMMAND.findall(alt)):
            return ""
        alt = _TEX_COMMAND.sub(lambda m: f" {_TEX_COMMANDS.get(m.group(1), m.group(1))} ", alt)
        alt = _TEX_SPACING.sub(" ", alt)
        alt = " ".join(alt.replace("{", " ").replace("}", " ").replace("^", " ").replace("_", " ").split())
    return alt

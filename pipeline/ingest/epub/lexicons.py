"""The book's own pronunciation lexicons: EPUB 3 PLS documents (``application/pls+xml``), listed in
the manifest or linked from a content document (``<link rel="pronunciation">``).

ChatTTS reads letters, not phonemes, so a lexeme is used where it gives an ``<alias>`` (the
spelling to say; the one marked ``prefer="true"`` where there are several) for each of its
``<grapheme>`` forms, and applied to the whole book. A lexeme with ``<phoneme>`` only is counted
in a warning that says how to respell those words. A lexicon that cannot be read costs a warning.
"""

from __future__ import annotations

from lxml import etree

from pipeline.errors import BookError
from pipeline.ingest.epub.members import MAX_METADATA_XML_BYTES, hostile
from pipeline.ingest.epub.package import Package, href_target
from pipeline.ingest.epub.reading import Reading, first_line
from pipeline.ingest.safezip import SafeZip
from pipeline.ingest.xmlsafe import HostileXmlError, local_name, parse_xml

PLS_TYPE = "application/pls+xml"
_NAMED = 5  # words named in the warning about phoneme-only entries


def pronunciation_links(root: etree._Element, member: str) -> list[str]:
    """The members a content document links as its pronunciation lexicons."""
    return [target for link in root.iter() if local_name(link) == "link"
            and "pronunciation" in (link.get("rel") or "").lower().split()
            and (target := href_target(member, link.get("href") or "").partition("#")[0])]


def book_lexicon(archive: SafeZip, package: Package, linked: list[str], reading: Reading
                 ) -> list[tuple[str, str]]:
    """(written, spoken) of every alias in the book's PLS documents, in the order they are listed."""
    listed = [item.member for item in package.manifest.values()
              if item.media_type == PLS_TYPE and item.member]
    members = list(dict.fromkeys([*listed, *linked]))  # each document once, however often it is linked
    entries: list[tuple[str, str]] = []
    phonemes_only: list[str] = []
    for member in members:
        root = _lexicon_root(archive, member, reading)
        if root is not None:
            _read_lexemes(root, entries, phonemes_only)
    words = list(dict.fromkeys(phonemes_only))  # a word two lexicons give counts once
    if words:
        named = ", ".join(words[:_NAMED]) + (" ..." if len(words) > _NAMED else "")
        reading.warn(f"the book's pronunciation lexicon gives {len(words)} words only as phonemes, "
                     f"which the voice cannot read ({named}); respell them in a --lexicon file "
                     "(`word = how to say it`)")
    return list(dict.fromkeys(entries))  # the same alias in two lexicons counts once


def _lexicon_root(archive: SafeZip, member: str, reading: Reading) -> etree._Element | None:
    if not archive.has(member):
        reading.warn(f"pronunciation lexicon '{member}' is missing from the archive; "
                     "its words are read as written")
        return None
    try:
        root = parse_xml(archive.read(member, max_bytes=MAX_METADATA_XML_BYTES))
    except HostileXmlError as exc:
        raise hostile(reading.path, member, exc) from None
    except BookError:
        raise
    except (etree.LxmlError, ValueError) as exc:
        reading.warn(f"pronunciation lexicon '{member}' is not well-formed XML ({first_line(exc)}); "
                     "its words are read as written")
        return None
    if local_name(root) != "lexicon":
        reading.warn(f"'{member}' is listed as a pronunciation lexicon but is none; ignored")
        return None
    return root


def _read_lexemes(root: etree._Element, entries: list[tuple[str, str]], phonemes_only: list[str]) -> None:
    for lexeme in (element for element in root if local_name(element) == "lexeme"):
        parts: dict[str, list[etree._Element]] = {}
        for part in lexeme:
            parts.setdefault(local_name(part), []).append(part)
        graphemes = [text for g in parts.get("grapheme", []) if (text := _text(g))]
        aliases = sorted(parts.get("alias", []), key=lambda a: (a.get("prefer") or "").lower() != "true")
        spoken = next((text for alias in aliases if (text := _text(alias))), None)
        if spoken is not None:
            entries.extend((grapheme, spoken) for grapheme in graphemes)
        elif graphemes and parts.get("phoneme"):
            phonemes_only.append(graphemes[0])


def _text(element: etree._Element) -> str:
    return " ".join("".join(element.itertext()).split())

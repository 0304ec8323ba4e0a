"""Hostile and broken EPUBs: every one ends in a one-line BookError naming the file, quickly, in bounded
memory, having written nothing to disk and touched no network."""

from __future__ import annotations

import io
import socket
import tempfile
import time
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import pytest
from books import CONTAINER_XML, chapter_xhtml, epub_members, opf_document, write_epub, zip_bytes

from pipeline.errors import BookError
from pipeline.ingest import IngestOptions, read_book
from pipeline.ingest.options import MiB

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def no_network_and_no_temporary_files(monkeypatch: pytest.MonkeyPatch):
    def refuse(*args, **kwargs):
        raise AssertionError("reading a book must not touch the network or write temporary files")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    for name in ("mkstemp", "mkdtemp", "NamedTemporaryFile", "TemporaryFile"):
        monkeypatch.setattr(tempfile, name, refuse)
    monkeypatch.setattr(zipfile.ZipFile, "extract", refuse)
    monkeypatch.setattr(zipfile.ZipFile, "extractall", refuse)


def members() -> dict[str, bytes | str]:
    return epub_members("Hostile", [("One", ["Innocent text."]), ("Two", ["More text."])])


def write(tmp_path: Path, data: bytes, name: str = "book.epub") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def refused(path: Path, match: str, options: IngestOptions | None = None, seconds: float = 5.0) -> BookError:
    """A one-line BookError naming the file, raised within ``seconds``, leaving the folder as it was."""
    before = sorted(path.parent.iterdir())
    started = time.monotonic()
    with pytest.raises(BookError, match=match) as raised:
        read_book(path, options)
    assert time.monotonic() - started < seconds
    message = str(raised.value)
    assert str(path) in message and "\n" not in message
    assert sorted(path.parent.iterdir()) == before
    return raised.value


# --- not an EPUB at all -------------------------------------------------------------------------------


def test_not_a_zip(tmp_path: Path):
    refused(write(tmp_path, b"This is plain text pretending to be an EPUB.\n" * 10), "not a readable ZIP")


def test_empty_file(tmp_path: Path):
    refused(write(tmp_path, b""), "not a readable ZIP")


@pytest.mark.parametrize("fraction", [0.3, 0.6, 0.95])
def test_truncated_zip(tmp_path: Path, fraction: float):
    data = zip_bytes(members())
    refused(write(tmp_path, data[: int(len(data) * fraction)]), "not a readable ZIP|damaged|truncated")


def test_corrupted_member_data(tmp_path: Path):
    data = bytearray(zip_bytes(members()))
    at = data.find(b"Innocent")  # stored? no: deflated; damage the middle of the archive instead
    at = at if at >= 0 else len(data) // 2
    for offset in range(at, at + 40):
        data[offset] ^= 0x5A
    error = refused(write(tmp_path, bytes(data)), "damaged|not|hostile|no readable|corrupt|well-formed")
    assert error.path.endswith("book.epub")


# --- zip bombs and size limits ---------------------------------------------------------------------------


def test_zip_bomb_member_is_refused_by_its_ratio_with_bounded_memory(tmp_path: Path):
    bomb = members()
    bomb["OEBPS/text/chapter001.xhtml"] = chapter_xhtml("One", ["x" * (32 * MiB)])  # ~32 KiB compressed
    path = write(tmp_path, zip_bytes(bomb))
    assert path.stat().st_size < 1 * MiB
    tracemalloc.start()
    try:
        refused(path, "zip bomb")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 24 * MiB  # reading stops at the ratio cap, far below the 32 MiB it would inflate to


def test_total_uncompressed_size_is_capped(tmp_path: Path):
    big = members()
    for number in range(3, 8):
        big[f"OEBPS/text/chapter00{number}.xhtml"] = chapter_xhtml(
            f"C{number}", [f"Words {number} " * 40_000]
        )
    opf = opf_document(
        "Big",
        manifest=[
            f'<item id="c{n}" href="text/chapter00{n}.xhtml" media-type="application/xhtml+xml"/>'
            for n in range(1, 8)
        ],
        spine=[f'<itemref idref="c{n}"/>' for n in range(1, 8)],
    )
    big["OEBPS/content.opf"] = opf
    path = write(tmp_path, zip_bytes(big))
    refused(path, "decompresses to more than", IngestOptions(max_uncompressed_bytes=1 * MiB))


def test_a_header_that_lies_about_sizes_is_not_trusted(tmp_path: Path):
    data = bytearray(zip_bytes(members()))
    # Make every central-directory entry claim a 4 GiB uncompressed size: reading must not preallocate it.
    at = 0
    while (at := data.find(b"PK\x01\x02", at)) >= 0:
        data[at + 24 : at + 28] = (0xFFFFFFF0).to_bytes(4, "little")
        at += 4
    path = write(tmp_path, bytes(data))
    try:
        book = read_book(path)
    except BookError as error:
        assert str(path) in str(error)
    else:
        assert book.chapters  # the real, small data was read and counted, whatever the header said


def test_too_many_entries(tmp_path: Path):
    many = list(members().items()) + [(f"OEBPS/junk/{number}.txt", b"") for number in range(300)]
    refused(write(tmp_path, zip_bytes(many)), "entries", IngestOptions(max_entries=200))


def test_too_many_entries_with_the_default_limit(tmp_path: Path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name, data in members().items():
            archive.writestr(name, data)
        for number in range(IngestOptions().max_entries + 1):
            archive.writestr(f"j/{number}", b"")
    refused(write(tmp_path, buffer.getvalue()), "entries")


def test_overlapping_entries(tmp_path: Path):
    data = bytearray(zip_bytes(members()))
    # Point the second central-directory entry at the first local header.
    first = data.find(b"PK\x01\x02")
    second = data.find(b"PK\x01\x02", first + 4)
    data[second + 42 : second + 46] = data[first + 42 : first + 46]
    refused(write(tmp_path, bytes(data)), "overlap|damaged")


def test_oversized_mimetype(tmp_path: Path):
    hostile = members()
    hostile["mimetype"] = b"application/epub+zip" + b" " * (4 * MiB)
    refused(write(tmp_path, zip_bytes(hostile, compression=zipfile.ZIP_STORED)), "mimetype")


# --- member names and kinds ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,problem",
    [
        ("../../evil.xhtml", "climbs out"),
        ("OEBPS/../../evil.xhtml", "climbs out"),
        ("/etc/evil.xhtml", "absolute"),
        ("C:/evil.xhtml", "absolute"),
        ("OEBPS\\evil.xhtml", "backslash"),
        ("..\\..\\evil.xhtml", "backslash"),
    ],
)
def test_hostile_member_names(tmp_path: Path, name: str, problem: str):
    hostile = list(members().items()) + [(name, b"<html/>")]
    refused(write(tmp_path, zip_bytes(hostile)), problem)


def test_nul_in_a_member_name(tmp_path: Path):
    hostile = list(members().items()) + [("OEBPS/aXb.xhtml", b"<html/>")]
    data = zip_bytes(hostile).replace(b"OEBPS/aXb.xhtml", b"OEBPS/a\x00b.xhtml")
    refused(write(tmp_path, data), "NUL")


def test_symlink_entry(tmp_path: Path):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members().items():
            archive.writestr(name, data)
        link = zipfile.ZipInfo("OEBPS/link.xhtml")
        link.create_system = 3
        link.external_attr = 0o120777 << 16
        archive.writestr(link, "/etc/passwd")
    refused(write(tmp_path, buffer.getvalue()), "symbolic link")


def test_encrypted_entry(tmp_path: Path):
    data = bytearray(zip_bytes(members()))
    at = 0
    while (at := data.find(b"PK\x01\x02", at)) >= 0:  # set the 'encrypted' flag in the central directory
        data[at + 8] |= 0x01
        at += 4
    refused(write(tmp_path, bytes(data)), "encrypted")


def test_duplicate_member_names(tmp_path: Path):
    hostile = list(members().items()) + [("OEBPS/content.opf", "<package/>")]
    with pytest.warns(UserWarning):  # zipfile itself warns when writing a duplicate name
        data = zip_bytes(hostile)
    refused(write(tmp_path, data), "twice")


# --- DRM --------------------------------------------------------------------------------------------

ENCRYPTION = """<?xml version="1.0"?>
<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" xmlns:enc="http://www.w3.org/2001/04/xmlenc#">
  <enc:EncryptedData>
    <enc:EncryptionMethod Algorithm="{algorithm}"/>
    <enc:CipherData><enc:CipherReference URI="{uri}"/></enc:CipherData>
  </enc:EncryptedData>
</encryption>"""


def test_drm_encrypted_content_is_named_as_such(tmp_path: Path):
    hostile = members()
    hostile["META-INF/encryption.xml"] = ENCRYPTION.format(
        algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc", uri="OEBPS/text/chapter001.xhtml"
    )
    error = refused(write(tmp_path, zip_bytes(hostile)), "DRM-protected")
    assert "DRM-free" in error.fix


@pytest.mark.parametrize("marker", ["META-INF/rights.xml", "META-INF/license.lcpl"])
def test_drm_rights_files(tmp_path: Path, marker: str):
    hostile = members()
    hostile[marker] = "<rights/>"
    refused(write(tmp_path, zip_bytes(hostile)), "DRM-protected")


def test_font_obfuscation_is_not_drm(tmp_path: Path):
    book = members()
    book["OEBPS/fonts/serif.otf"] = b"\x00" * 64
    book["META-INF/encryption.xml"] = ENCRYPTION.format(
        algorithm="http://www.idpf.org/2008/embedding", uri="OEBPS/fonts/serif.otf"
    )
    assert [c.title for c in read_book(write(tmp_path, zip_bytes(book))).chapters] == ["One", "Two"]


# --- container and package document -------------------------------------------------------------------


def test_missing_container(tmp_path: Path):
    broken = members()
    del broken["META-INF/container.xml"]
    refused(write(tmp_path, zip_bytes(broken)), "container.xml is missing")


def test_container_that_is_not_xml(tmp_path: Path):
    broken = members()
    broken["META-INF/container.xml"] = "<container><rootfiles><rootfile full-path="
    refused(write(tmp_path, zip_bytes(broken)), "not well-formed XML")


def test_container_pointing_at_a_missing_package(tmp_path: Path):
    broken = members()
    broken["META-INF/container.xml"] = CONTAINER_XML.replace("OEBPS/content.opf", "OEBPS/nowhere.opf")
    refused(write(tmp_path, zip_bytes(broken)), "nowhere.opf")


def test_package_that_is_not_xml(tmp_path: Path):
    broken = members()
    broken["OEBPS/content.opf"] = "<package><metadata>"
    refused(write(tmp_path, zip_bytes(broken)), "content.opf.*not well-formed")


def test_package_with_an_empty_spine(tmp_path: Path):
    broken = members()
    broken["OEBPS/content.opf"] = opf_document("T", manifest=[], spine=[])
    refused(write(tmp_path, zip_bytes(broken)), "empty spine")


def test_only_a_mimetype(tmp_path: Path):
    refused(write(tmp_path, zip_bytes({"mimetype": "application/epub+zip"})), "container.xml is missing")


def test_manifest_hrefs_leaving_the_archive_are_ignored(tmp_path: Path):
    book = members()
    opf = book["OEBPS/content.opf"]
    assert isinstance(opf, str)
    book["OEBPS/content.opf"] = opf.replace(
        "</manifest>",
        '<item id="evil" href="../../../etc/passwd" media-type="application/xhtml+xml"/>'
        '<item id="web" href="http://example.invalid/x.xhtml" media-type="application/xhtml+xml"/>'
        "</manifest>",
    ).replace("</spine>", '<itemref idref="evil"/><itemref idref="web"/></spine>')
    result = read_book(write(tmp_path, zip_bytes(book)))
    assert [c.title for c in result.chapters] == ["One", "Two"]
    assert any("outside the book" in warning for warning in result.warnings)


# --- XML attacks --------------------------------------------------------------------------------------

XXE = '<?xml version="1.0"?>\n<!DOCTYPE foo [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">'
    + "".join(
        f'<!ENTITY lol{n} "{("&lol" + (str(n - 1) if n > 1 else "") + ";") * 10}">' for n in range(1, 10)
    )
    + "]>\n"
)


@pytest.mark.parametrize(
    "member",
    ["META-INF/container.xml", "OEBPS/content.opf", "OEBPS/nav.xhtml", "OEBPS/text/chapter001.xhtml"],
)
def test_external_entities_are_refused_everywhere(tmp_path: Path, member: str):
    hostile = members()
    original = hostile[member]
    assert isinstance(original, str)
    body = original.split("?>", 1)[1] if original.startswith("<?xml") else original
    body = body.replace("<!DOCTYPE html>", "")
    hostile[member] = XXE + body.replace("Innocent text.", "&xxe;").replace(
        "</rootfiles>", "</rootfiles>&xxe;"
    )
    error = refused(write(tmp_path, zip_bytes(hostile)), "entit")
    assert "root:" not in str(error)


@pytest.mark.parametrize(
    "member", ["META-INF/container.xml", "OEBPS/content.opf", "OEBPS/text/chapter001.xhtml"]
)
def test_billion_laughs_is_refused_fast(tmp_path: Path, member: str):
    hostile = members()
    original = hostile[member]
    assert isinstance(original, str)
    body = original.split("?>", 1)[1].replace("<!DOCTYPE html>", "")
    hostile[member] = LAUGHS + body.replace("Innocent text.", "&lol9;")
    refused(write(tmp_path, zip_bytes(hostile)), "entit", seconds=2.0)


def test_entity_declarations_in_utf16_are_refused(tmp_path: Path):
    hostile = members()
    original = hostile["OEBPS/content.opf"]
    assert isinstance(original, str)
    hostile["OEBPS/content.opf"] = (XXE + original.split("?>", 1)[1]).encode("utf-16")
    refused(write(tmp_path, zip_bytes(hostile)), "entit")


def test_an_external_dtd_is_not_fetched(tmp_path: Path):
    book = members()
    chapter = book["OEBPS/text/chapter001.xhtml"]
    assert isinstance(chapter, str)
    book["OEBPS/text/chapter001.xhtml"] = chapter.replace(
        "<!DOCTYPE html>",
        '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" "http://example.invalid/xhtml11.dtd">',
    )
    result = read_book(write(tmp_path, zip_bytes(book)))  # the autouse fixture fails on any connection
    assert result.chapters[0].paragraphs == ("Innocent text.",)


def test_deeply_nested_markup_is_bounded(tmp_path: Path):
    book = members()
    book["OEBPS/text/chapter001.xhtml"] = chapter_xhtml("One", ["x"]).replace(
        "<p>x</p>", "<div>" * 5000 + "deep" + "</div>" * 5000
    )
    path = write(tmp_path, zip_bytes(book))
    started = time.monotonic()
    try:
        result = read_book(path)
    except BookError as error:
        assert str(path) in str(error)
    else:
        assert result.chapters
    assert time.monotonic() - started < 5


def test_a_huge_text_node_is_bounded(tmp_path: Path):
    book = members()
    book["OEBPS/text/chapter001.xhtml"] = chapter_xhtml(
        "One", ["word " * (3 * MiB)]
    )  # 15 MiB in one text node
    path = write(tmp_path, zip_bytes(book))
    started = time.monotonic()
    try:  # let it past the ratio cap, to reach the parser's own limit on text nodes
        result = read_book(path, IngestOptions(max_compression_ratio=100_000))
    except BookError as error:
        assert str(path) in str(error)
    else:
        assert result.chapters
    assert time.monotonic() - started < 20


def test_a_valid_book_passes_the_same_guards(tmp_path: Path):
    path = write_epub(tmp_path / "ok.epub", "Fine", [("One", ["Text."])])
    assert read_book(path).chapters[0].paragraphs == ("Text.",)


def test_compressed_size_zero_member_cannot_divide_by_zero(tmp_path: Path):
    book = members()
    book["OEBPS/empty.txt"] = b""
    assert read_book(write(tmp_path, zip_bytes(book))).chapters


def test_zlib_stream_garbage(tmp_path: Path):
    data = bytearray(zip_bytes(members(), compression=zipfile.ZIP_DEFLATED))
    header = data.find(b"PK\x03\x04", data.find(b"content.opf") - 60)
    name_length = int.from_bytes(data[header + 26 : header + 28], "little")
    extra_length = int.from_bytes(data[header + 28 : header + 30], "little")
    start = header + 30 + name_length + extra_length
    data[start : start + 16] = zlib.compress(b"")[:2] + b"\xff" * 14
    refused(write(tmp_path, bytes(data)), "damaged|not|content.opf")

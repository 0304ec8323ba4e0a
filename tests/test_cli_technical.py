"""A technical book as a user meets it on the command line: `inspect --sentences` shows the reading
(code listings announced, formulas stood in for, navigation left out), `--code` changes it, every
warning counts, and a bad `--code` ends with one line and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.books import custom_epub, xhtml_document
from tests.conftest import env_for
from tests.e2e_helpers import cli

_MATH = '<math xmlns="http://www.w3.org/1998/Math/MathML" alttext="Alternative text not available"><mtable/></math>'


@pytest.fixture()
def env(settings_factory) -> dict[str, str]:  # type: ignore[no-untyped-def]
    environment = env_for(settings_factory())
    environment.pop("TTS_JOBS_BROKER_URL")  # nothing here needs a broker
    return environment


def manual(path: Path) -> Path:
    body = (
        f"<h1>Setup</h1><p>Then {_MATH}, {_MATH} hold.</p><pre><code>x = [64,128]\nprint(x)</code></pre>"
        '<p>The A100 80GB card.</p><div class="familylinks"><p>Parent topic: <a href="c.xhtml">Top</a></p></div>'
    )
    nav = '<ol><li><a href="c.xhtml">Setup</a></li></ol>'
    return custom_epub(path, [("c.xhtml", xhtml_document(body))], nav=nav, title="A Manual")


def test_inspect_shows_how_a_technical_book_is_read_and_code_changes_it(tmp_path: Path, env) -> None:  # type: ignore[no-untyped-def]
    book = manual(tmp_path / "manual.epub")
    shown = cli(["inspect", str(book), "--json", "--sentences"], env)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert report["chapters"][0]["sentence_texts"] == [
        "Setup", "Then a formula hold.", "Code listing, two lines, skipped.", "The A one hundred, eighty gigabytes card.",
    ]
    warnings = " | ".join(report["warnings"])
    assert "2 formulas without a text alternative" in warnings and "1 code listing (2 lines)" in warnings
    assert "left out 1 navigation line" in warnings
    skipped = json.loads(cli(["inspect", str(book), "--json", "--sentences", "--code", "skip"], env).stdout)
    assert "Code listing, two lines, skipped." not in skipped["chapters"][0]["sentence_texts"]


def test_a_bad_code_choice_ends_with_one_line_and_exit_code_2(tmp_path: Path, env) -> None:  # type: ignore[no-untyped-def]
    result = cli(["inspect", str(manual(tmp_path / "manual.epub")), "--code", "loud"], env)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == "error: unknown --code loud: use announce, skip, read"

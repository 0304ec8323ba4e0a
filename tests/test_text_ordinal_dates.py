"""An ordinal date after an article or determiner is read once: 'The 3rd of May' is 'The third of
May', never 'The the third of May' (issue 38)."""

from __future__ import annotations

import pytest

from pipeline.text.normalize import normalize_text


@pytest.mark.parametrize(("written", "spoken"), [
    ("The 3rd of May was cold.", "The third of May was cold."),
    ("We met on the 3rd of May.", "We met on the third of May."),
    ("That 4th of July was loud.", "That fourth of July was loud."),
    ("Her 2nd May party was small.", "Her second of May party was small."),
    ("It was his 21st birthday.", "It was his twenty first birthday."),
    ("On 5 March we left.", "On the fifth of March we left."),  # no determiner: 'the' is supplied
    ("Bathe 3rd May.", "Bathe the third of May."),  # a word ending in 'the' is not the article
])
def test_ordinal_dates_read_once(written: str, spoken: str) -> None:
    assert normalize_text(written) == spoken

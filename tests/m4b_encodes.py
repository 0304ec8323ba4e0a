"""Which chapters' M4B pieces an assembly encodes itself: the assembly's own encodes and those it
begins while a stretch ahead is still prepared (``pipeline/audio/early_m4b.py``)."""

from __future__ import annotations

import threading


def spy_m4b_encodes(monkeypatch) -> list[int]:  # type: ignore[no-untyped-def]
    """Patch both of the assembly's M4B piece encoders to note each piece's chapter index (in the
    order they begin) before encoding it; returns that list."""
    from pipeline.audio import assemble, early_m4b
    from pipeline.audio.export import encode_m4b_piece

    indices: list[int] = []
    lock = threading.Lock()

    def noted(chapter, *rest):  # type: ignore[no-untyped-def]
        with lock:
            indices.append(chapter.index)
        return encode_m4b_piece(chapter, *rest)

    monkeypatch.setattr(assemble, "encode_m4b_piece", noted)
    monkeypatch.setattr(early_m4b, "encode_m4b_piece", noted)
    return indices

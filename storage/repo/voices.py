"""Named voices."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage.models import Voice


def get_voice(session: Session, name: str) -> Voice | None:
    return session.scalar(select(Voice).where(Voice.name == name))


def list_voices(session: Session) -> list[Voice]:
    return list(session.scalars(select(Voice).order_by(Voice.name)))


def add_voice(session: Session, name: str, embedding: str, seed: int | None, source: str) -> Voice:
    voice = Voice(name=name, embedding=embedding, seed=seed, source=source)
    session.add(voice)
    session.flush()
    return voice

"""Synthesis workers as the planner sees them: device, limits, calibration."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from storage.models import Worker, utcnow


def register_worker(session: Session, name: str, **fields: object) -> Worker:
    """Record (or refresh) a synthesis worker's device, limits and calibration at start-up."""
    worker = session.scalar(select(Worker).where(Worker.name == name))
    if worker is None:
        worker = Worker(name=name, **fields)
        session.add(worker)
    else:
        for key, value in fields.items():
            setattr(worker, key, value)
        worker.started_at = worker.seen_at = utcnow()
    session.flush()
    return worker


def lower_worker_max_rows(session: Session, name: str, rows: int) -> None:
    """Remember that a batch of more than ``rows`` ran out of memory on this worker."""
    session.execute(
        update(Worker).where(Worker.name == name, or_(Worker.max_rows.is_(None), Worker.max_rows > rows))
        .values(max_rows=rows, seen_at=utcnow())
        .execution_options(synchronize_session=False)
    )


def touch_worker(session: Session, name: str) -> None:
    session.execute(update(Worker).where(Worker.name == name).values(seen_at=utcnow())
                    .execution_options(synchronize_session=False))


def live_workers(session: Session, since: datetime) -> list[Worker]:
    return list(session.scalars(select(Worker).where(Worker.seen_at >= since).order_by(Worker.id)))

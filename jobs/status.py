"""Status: every job, or one in detail, with progress, recent throughput and an ETA."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from jobs.lifecycle import require_job
from jobs.runners import recognise_interrupted
from jobs.runtime import Runtime
from storage import repo
from storage.models import Job, JobMode, JobState, utcnow

THROUGHPUT_WINDOW_SECONDS = 300


@dataclass(frozen=True)
class JobStatus:
    id: int
    title: str
    state: str
    sentences_total: int
    sentences_done: int
    sentences_failed: int
    audio_seconds: float
    sentences_hit_limit: int
    outputs: list[str]
    report: dict[str, Any]
    error: str | None
    source: str
    voice: str
    warnings: list[str] = field(default_factory=list)
    x_realtime: float | None = None  # audio seconds per wall second over the last few minutes
    eta_seconds: float | None = None  # from that recent throughput
    chapters: list[dict[str, Any]] | None = None
    mode: str = JobMode.CLUSTER.value  # "embedded": made and moved by one `tts-jobs run`
    resume: str | None = None  # the command that starts a stopped job again
    out_dir: str | None = None  # the book's own folder

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if data["chapters"] is None:
            del data["chapters"]
        return data


def job_statuses(rt: Runtime, job_id: int | None = None) -> list[JobStatus]:
    """Every job (newest first), or job ``job_id`` with its chapters. Raises NoSuchJob for a job
    that does not exist. An embedded job whose process is gone is recorded as interrupted first."""
    recognise_interrupted(rt)
    with rt.session() as session:
        if job_id is not None:
            jobs = [require_job(session, job_id)]
        else:
            jobs = repo.list_jobs(session)
        progress = repo.job_progress(session, [j.id for j in jobs])
        speeds = _recent_speeds(session, [j.id for j in jobs if j.job_state == JobState.SYNTHESIZING])
        return [_status(session, job, progress[job.id], speeds.get(job.id), detail=job_id is not None)
                for job in jobs]


def _status(session: Session, job: Job, p: repo.Progress, speed: float | None, detail: bool) -> JobStatus:
    chapters = None
    if detail:
        chapters = [{"index": c.index, "title": c.title, "sentences": n, "sentences_done": d,
                     "audio_seconds": round(s, 2)}
                    for c, n, d, s in repo.chapter_progress(session, job.id)]
    return JobStatus(
        id=job.id, title=job.title, state=job.state, sentences_total=p.total,
        sentences_done=p.done, sentences_failed=p.failed, audio_seconds=round(p.audio_seconds, 2),
        sentences_hit_limit=p.hit_limit, outputs=[o for o in job.outputs if Path(o).is_file()],
        report=dict(job.report or {}), error=job.error, source=job.source_name, voice=job.voice_name,
        warnings=list(job.warnings), x_realtime=round(speed, 2) if speed else None,
        eta_seconds=_eta(p, speed), chapters=chapters, mode=job.mode, resume=_resume_command(job),
        out_dir=(job.options or {}).get("out_dir"))


def _resume_command(job: Job) -> str | None:
    """`tts-jobs retry N` for a job that stopped without finishing (an embedded job resumes in
    the process that runs the command; `run` of the same book does the same)."""
    if job.job_state in (JobState.FAILED, JobState.CANCELLED, JobState.INTERRUPTED):
        return f"tts-jobs retry {job.id}"
    return None


def _recent_speeds(session: Session, job_ids: list[int]) -> dict[int, float]:
    now = utcnow()
    recent = repo.recent_audio(session, job_ids, now - timedelta(seconds=THROUGHPUT_WINDOW_SECONDS))
    speeds = {}
    for job_id, (seconds, started) in recent.items():
        if started.tzinfo is None:  # SQLite returns naive UTC datetimes
            started = started.replace(tzinfo=now.tzinfo)
        span = max((now - started).total_seconds(), 1.0)
        speeds[job_id] = seconds / min(span, THROUGHPUT_WINDOW_SECONDS)
    return speeds


def _eta(p: repo.Progress, speed: float | None) -> float | None:
    """Remaining audio (estimated from the average sentence so far) over the recent throughput."""
    if not speed or p.done == 0 or p.done >= p.total:
        return None
    remaining_audio = (p.total - p.done) * (p.audio_seconds / p.done)
    return round(remaining_audio / speed, 1)

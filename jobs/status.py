"""Status: every job, or one in detail, with progress, speed, elapsed time and an honest ETA.

Speed and ETA come from what was measured, never from a guess:

- While a job is spoken, its speed is the audio (and text) its batches finished in the last
  ``THROUGHPUT_WINDOW_SECONDS`` produced, over the time since the earliest of those batches
  began; its ETA is the text still to speak over that text rate. Text, not sentences: the planner
  speaks the longest sentences first, so a rate in sentences would make early ETAs far too long.
  No batch finished yet: no speed, no ETA.
- A done job keeps its speed: the audio spoken over the time its batches ran (overlapping
  batches counted once, waits between them not at all). Its elapsed time runs from submission to
  the end. A stopped job (failed, cancelled, interrupted) shows no speed: nothing runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from jobs.choices.options import recorded_options
from jobs.leases import holder_gone
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
    audio_seconds: float  # speech spoken so far, without the pauses assembly adds
    sentences_hit_limit: int
    outputs: list[str]
    report: dict[str, Any]
    error: str | None
    source: str
    voice: str
    warnings: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)  # what the job was asked for (JobOptions.shown)
    x_realtime: float | None = None  # audio seconds per second: recent while spoken, overall once done
    eta_seconds: float | None = None  # until the last sentence is spoken, from the recent text rate
    chapters: list[dict[str, Any]] | None = None
    mode: str = JobMode.CLUSTER.value  # "embedded": made and moved by one `tts-jobs run`
    resume: str | None = None  # the command that starts a stopped job again
    out_dir: str | None = None  # the book's own folder
    length_seconds: float | None = None  # the audiobook's length, pauses included, once assembled
    elapsed_seconds: float | None = None  # from submission to the end (or to now, while active)
    synthesis_seconds: float | None = None  # the time its batches ran (a done job's speed divides by it)
    created_at: str | None = None  # ISO 8601, UTC
    finished_at: str | None = None
    waiting: str | None = None  # what will move a stage no worker holds (a lost message: the sweep)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if data["chapters"] is None:
            del data["chapters"]
        return data

    @property
    def shown_audio_seconds(self) -> float:
        """What a person calls the audio's length: the file's once assembled, else the speech so far."""
        return self.length_seconds if self.length_seconds is not None else self.audio_seconds


@dataclass(frozen=True)
class StageProgress:
    """One step of a long run, as a progress display shows it: the stage (``reading``,
    ``speaking``, ``assembling``, ``encoding``...), how far it is, and for speaking what it made."""

    stage: str
    done: int = 0
    total: int = 0  # 0: no count for this stage
    audio_seconds: float = 0.0  # speech produced so far
    x_realtime: float | None = None  # recent audio seconds per second
    eta_seconds: float | None = None  # None until a rate is measured
    detail: str = ""  # e.g. "1/3 books finished (0 failed)"


OnStage = Callable[[StageProgress], None]


@dataclass(frozen=True)
class _Rate:
    audio_per_second: float
    characters_per_second: float


def job_statuses(rt: Runtime, job_id: int | None = None) -> list[JobStatus]:
    """Every job (newest first), or job ``job_id`` with its chapters. Raises NoSuchJob for a job
    that does not exist. An embedded job whose process is gone is recorded as interrupted first."""
    recognise_interrupted(rt)
    with rt.session() as session:
        jobs = [require_job(session, job_id)] if job_id is not None else repo.list_jobs(session)
        progress = repo.job_progress(session, [j.id for j in jobs])
        measures = _measures(session, jobs, utcnow())
        return [replace(_status(session, job, progress[job.id], measures[job.id], detail=job_id is not None),
                        waiting=_waiting(job, rt.settings.lease_seconds, measures[job.id].now))
                for job in jobs]


def speaking_progress(status: JobStatus) -> StageProgress:
    """One job's speaking stage, from its status."""
    return StageProgress("speaking", status.sentences_done, status.sentences_total, status.audio_seconds,
                         status.x_realtime, status.eta_seconds)


def jobs_progress(rt: Runtime, job_ids: Sequence[int], detail: str = "") -> StageProgress:
    """The speaking stage of several jobs together (a bulk run): their sentences and audio, the
    rate their batches reached lately, and the time the text they still hold takes at that rate."""
    now = utcnow()
    with rt.read_session() as session:
        progress = repo.job_progress(session, list(job_ids)).values()
        rate = _recent_rate(session, list(job_ids), now)
        pending = sum(_pending_characters(session, list(job_ids)).values())
    return StageProgress("speaking", sum(p.done for p in progress), sum(p.total for p in progress),
                         sum(p.audio_seconds for p in progress),
                         round(rate.audio_per_second, 2) if rate else None, _eta(pending, rate), detail)


@dataclass(frozen=True)
class _Measures:
    now: datetime
    rate: _Rate | None  # recent, while spoken
    pending_characters: int
    synthesis_seconds: float | None  # once done


def _measures(session: Session, jobs: list[Job], now: datetime) -> dict[int, _Measures]:
    """Rates and pending text of the jobs being spoken; the time the done ones' batches ran."""
    spoken = {j.id for j in jobs if j.job_state == JobState.SYNTHESIZING}
    pending = _pending_characters(session, list(spoken))
    busy = _synthesis_seconds(session, [j.id for j in jobs if j.job_state == JobState.DONE])
    return {job.id: _Measures(now, _recent_rate(session, [job.id], now) if job.id in spoken else None,
                              pending.get(job.id, 0), busy.get(job.id))
            for job in jobs}


def _status(session: Session, job: Job, p: repo.Progress, m: _Measures, detail: bool) -> JobStatus:
    chapters = None
    if detail:
        chapters = [{"index": c.index, "title": c.title, "sentences": n, "sentences_done": d,
                     "audio_seconds": round(s, 2)}
                    for c, n, d, s in repo.chapter_progress(session, job.id)]
    report = dict(job.report or {})
    return JobStatus(
        id=job.id, title=job.title, state=job.state, sentences_total=p.total,
        sentences_done=p.done, sentences_failed=p.failed, audio_seconds=round(p.audio_seconds, 2),
        sentences_hit_limit=p.hit_limit, outputs=[o for o in job.outputs if Path(o).is_file()],
        report=report, error=job.error, source=job.source_name, voice=job.voice_name,
        warnings=list(job.warnings), options=recorded_options(job).shown(), x_realtime=_speed(job, p, m),
        eta_seconds=_eta(m.pending_characters, m.rate) if p.done < p.total else None,
        chapters=chapters, mode=job.mode, resume=_resume_command(job),
        out_dir=(job.options or {}).get("out_dir"), length_seconds=report.get("total_seconds"),
        elapsed_seconds=_elapsed(job, m.now), synthesis_seconds=m.synthesis_seconds,
        created_at=_iso(job.created_at), finished_at=_iso(job.finished_at))


def _speed(job: Job, p: repo.Progress, m: _Measures) -> float | None:
    if m.rate is not None:
        return round(m.rate.audio_per_second, 2)
    if job.job_state == JobState.DONE and m.synthesis_seconds:
        return round(p.audio_seconds / m.synthesis_seconds, 2)
    return None


def _waiting(job: Job, lease_seconds: float, now: datetime) -> str | None:
    """For a cluster job whose reading or assembly no live worker has held for a lease (its message
    lost while the broker was down, its worker killed): what moves it. None while all is well."""
    if job.embedded or job.job_state not in (JobState.INGESTING, JobState.ASSEMBLING):
        return None
    if not holder_gone(job.runner, job.heartbeat_at, lease_seconds):
        return None
    if now - _aware(job.updated_at) < timedelta(seconds=lease_seconds):
        return None  # its message is young: a worker takes it in turn
    stage = "reading" if job.job_state == JobState.INGESTING else "assembly"
    return (f"no worker holds its {stage}: a running worker's sweep sends it again within a minute "
            f"(`tts-jobs retry {job.id}` sends it now)")


def _resume_command(job: Job) -> str | None:
    """`tts-jobs retry N` for a job that stopped without finishing (an embedded job resumes in
    the process that runs the command; `run` of the same book does the same)."""
    if job.job_state in (JobState.FAILED, JobState.CANCELLED, JobState.INTERRUPTED):
        return f"tts-jobs retry {job.id}"
    return None


def _eta(pending_characters: int, rate: _Rate | None) -> float | None:
    if rate is None or rate.characters_per_second <= 0 or pending_characters <= 0:
        return None
    return round(pending_characters / rate.characters_per_second, 1)


def _recent_rate(session: Session, job_ids: list[int], now: datetime) -> _Rate | None:
    """What the jobs' batches finished in the recent window made per second, counted from the
    moment the earliest of them began (a long batch that began before the window counts whole)."""
    if not job_ids:
        return None
    since = now - timedelta(seconds=THROUGHPUT_WINDOW_SECONDS)
    audio, characters, began = repo.spoken_since(session, job_ids, since)
    if began is None or not audio:
        return None
    span = max((now - _aware(began)).total_seconds(), 1.0)
    return _Rate(float(audio) / span, float(characters or 0) / span)


def _pending_characters(session: Session, job_ids: list[int]) -> dict[int, int]:
    """The text each job still has to speak, in characters."""
    return repo.pending_characters(session, job_ids) if job_ids else {}


def _synthesis_seconds(session: Session, job_ids: list[int]) -> dict[int, float]:
    """How long each job's batches ran: the union of their [began, finished] spans, so batches
    side by side on several GPUs count once and the waits between them (a resume) not at all."""
    if not job_ids:
        return {}
    rows = repo.spoken_batch_spans(session, job_ids)
    spans: dict[int, list[tuple[datetime, datetime]]] = {}
    for job_id, began, finished in rows:
        spans.setdefault(job_id, []).append((_aware(began), _aware(finished)))
    return {job_id: round(_union_seconds(intervals), 2) for job_id, intervals in spans.items()}


def _union_seconds(intervals: list[tuple[datetime, datetime]]) -> float:
    total, end = 0.0, None
    for began, finished in sorted(intervals):
        if end is not None and began < end:
            began = end
        if finished > began:
            total += (finished - began).total_seconds()
            end = finished
    return total


def _elapsed(job: Job, now: datetime) -> float | None:
    if job.created_at is None:
        return None
    end = _aware(job.finished_at) if job.finished_at is not None and job.job_state.is_final else now
    return round(max((end - _aware(job.created_at)).total_seconds(), 0.0), 1)


def _aware(moment: datetime) -> datetime:
    """SQLite returns naive datetimes; every one of ours is UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=utcnow().tzinfo)


def _iso(moment: datetime | None) -> str | None:
    return _aware(moment).isoformat(timespec="seconds") if moment is not None else None

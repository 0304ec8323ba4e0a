"""Use cases shared by the CLI, the Celery tasks and the tests.

Each stage reads what the previous one recorded and records its own result before the next starts:

    submit_book ─> ingest_job ─> plan_pending ─> synthesize_batch ─> assemble_job
    (validate, store)  (chapters,     (batches)       (sentence audio)    (audiobook files)
                        sentences)

(A GPU worker's task for one batch goes on with the queued batches after it through the same
decode slots: jobs/batch_stream.py, built from the claim/speak/record steps below.)

Every function is idempotent: running it twice gives the same rows and files, so a redelivered
Celery message or a rerun after a crash only redoes what is missing.
"""

from __future__ import annotations

import functools
import logging
import shutil
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session, sessionmaker

from jobs.settings import Settings
from pipeline import lengths
from pipeline.batching import MemoryModel, PlanLimits, plan_batches
from pipeline.errors import (
    AssemblyError,
    BookError,
    SentenceTooLargeError,
    TtsJobsError,
    VoiceError,
)
from pipeline.files import file_sha256
from pipeline.types import BookMetadata, PlannedSentence, Sentence, SynthesisRequest, SynthesisResult
from storage import repo
from storage.artifacts import ArtifactStore
from storage.db import make_engine, make_read_session_factory, make_session_factory, upgrade
from storage.models import BatchState, Job, JobState, SentenceState

if TYPE_CHECKING:
    from pipeline.audio import SentenceWavWriter
    from pipeline.engine import Engine

log = logging.getLogger(__name__)

DEFAULT_VOICE = "default"
DEFAULT_VOICE_SEED = 2222  # a voice every installation has without asking
SEED_VOICE_PREFIX = "seed:"  # a voice stored as its seed; the worker derives the embedding
FORMATS = ("m4b", "mp3", "ogg", "flac", "wav")


@dataclass(frozen=True)
class JobOptions:
    """What a user chooses per book on `submit` / `run`."""

    formats: tuple[str, ...] = ("m4b",)
    out_dir: Path | None = None
    voice: str = DEFAULT_VOICE
    priority: int = 0
    refine: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"formats": list(self.formats), "out_dir": str(self.out_dir) if self.out_dir else None,
                "refine": self.refine}


@dataclass
class Runtime:
    """What one process needs to run use cases: settings, the database and the artifact store."""

    settings: Settings
    sessions: sessionmaker[Session]
    artifacts: ArtifactStore

    def session(self) -> Session:
        return self.sessions()

    def read_session(self) -> Session:
        """A session that only reads: on SQLite it does not wait for (or hold) the write lock."""
        return self._read_sessions()

    @functools.cached_property
    def _read_sessions(self) -> sessionmaker[Session]:
        return make_read_session_factory(self.sessions.kw["bind"])


def open_runtime(settings: Settings, upgrade_schema: bool | None = None) -> Runtime:
    """Connect to the database. The embedded SQLite default upgrades its own schema."""
    if upgrade_schema is None:
        upgrade_schema = settings.database_url.startswith("sqlite")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if upgrade_schema:
        upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    return Runtime(settings=settings, sessions=make_session_factory(engine),
                   artifacts=ArtifactStore(settings.data_dir))


# ---------------------------------------------------------------- submit


def validate_book(path: Path):  # type: ignore[no-untyped-def]
    """Read the book the way the job will, so that bad input is reported before anything is queued."""
    from pipeline.ingest import SUPPORTED_EXTENSIONS, read_book

    if not path.exists():
        raise BookError(path, "no such file", "check the path")
    if not path.is_file():
        raise BookError(path, "not a file", "pass a book file, not a folder")
    if path.suffix.lower() not in SUPPORTED_EXTENSIONS:
        supported = ", ".join(sorted(SUPPORTED_EXTENSIONS))
        raise BookError(path, f"unsupported file type {path.suffix or '(none)'}",
                        f"convert it to one of {supported}")
    return read_book(path)


def submit_book(rt: Runtime, path: Path, options: JobOptions) -> int:
    """Validate a book, store a copy in the data directory and record a queued job. Returns its id."""
    path = Path(path)
    book = validate_book(path)
    bad = [f for f in options.formats if f not in FORMATS]
    if bad or not options.formats:
        raise TtsJobsError(f"unknown output format {', '.join(bad) or '(none)'}: use {', '.join(FORMATS)}")
    with rt.session() as session:
        job = add_job(rt, session, path, book, options, file_sha256(path))
        session.commit()
        log.info("job=%s: submitted %s (%s)", job.id, path, book.format)
        return job.id


def add_job(rt: Runtime, session: Session, path: Path, book, options: JobOptions, sha256: str) -> Job:  # type: ignore[no-untyped-def]
    """Record a queued job for a validated book and store its copy; the caller commits."""
    job = Job(source_name=path.name, source_path="", source_sha256=sha256,
              book_format=book.format, title=book.metadata.title or path.stem,
              authors=list(book.metadata.authors), language=book.metadata.language,
              priority=options.priority, voice_name=options.voice,
              voice_embedding=resolve_voice(session, options.voice),
              options=options.to_json(), warnings=list(book.warnings))
    session.add(job)
    session.flush()
    job.source_path = str(rt.artifacts.store_source(job.id, path))
    return job


def resolve_voice(session: Session, name: str) -> str:
    """The voice spec a job is read with: a stored embedding, or ``seed:N`` for seed voices."""
    voice = repo.get_voice(session, name)
    if voice is not None:
        return voice.embedding if voice.embedding else f"{SEED_VOICE_PREFIX}{voice.seed}"
    if name == DEFAULT_VOICE:
        return f"{SEED_VOICE_PREFIX}{DEFAULT_VOICE_SEED}"
    known = ", ".join([DEFAULT_VOICE] + [v.name for v in repo.list_voices(session)])
    raise VoiceError(f"unknown voice {name!r}: use one of {known}, or create it with "
                     f"`tts-jobs voice new {name}`")


# ---------------------------------------------------------------- ingest


def ingest_job(rt: Runtime, job_id: int) -> bool:
    """Read the stored book into chapters and sentences. True when the job is ready for planning.

    The book is parsed outside any database transaction (seconds for a big one): on SQLite a
    transaction holds the write lock, and GPU workers could not record their batches meanwhile.
    The chapters are then recorded only if no other delivery recorded them first."""
    from pipeline.ingest import read_book
    from pipeline.text import split_sentences

    with rt.session() as session:
        ready = _ingested_already(session, job_id)
        if ready is None:
            job = repo.get_job(session, job_id)
            source_path, source_name = rt.artifacts.resolve(job.source_path), job.source_name
        session.commit()
    if ready is not None:
        return ready
    try:
        book = read_book(source_path)
        # the rows too (token limits, seeds) before the transaction: it holds SQLite's write lock
        chapters = [(chapter, [_new_sentence(job_id, chapter.index, s) for s in split_sentences(chapter)])
                    for chapter in book.chapters]
    except BookError as exc:
        fail_job(rt, job_id, f"{source_name}: {exc.problem}" + (f" ({exc.fix})" if exc.fix else ""))
        return False
    with rt.session() as session:
        ready = _ingested_already(session, job_id, for_update=True)
        if ready is not None:
            session.commit()
            return ready
        _record_book(rt, session, repo.get_job(session, job_id), book, chapters)
        repo.move_job(session, job_id, JobState.SYNTHESIZING, only_from=[JobState.QUEUED, JobState.INGESTING])
        session.commit()
    log.info("job=%s: %d chapters, %d sentences", job_id, len(chapters), sum(len(s) for _, s in chapters))
    return True


def prepare_ingest(rt: Runtime) -> None:
    """Load what reading a book needs (the readers, the sentence splitter and the number speller it
    loads on first use, the ORM's mappers) and open this process's database connection: a worker's
    first book is then read as fast as the next (cold, the first took ~0.2 s more). Reads nothing."""
    import importlib

    from sqlalchemy.orm import configure_mappers

    for module in ("pipeline.ingest", "pipeline.text", "pipeline.text.spoken"):
        importlib.import_module(module)
    configure_mappers()
    with rt.sessions.kw["bind"].connect():  # pooled for the first task; no transaction, no lock
        pass


def _ingested_already(session: Session, job_id: int, for_update: bool = False) -> bool | None:
    """None while the job still waits for its book to be read; else whether it is ready to plan
    (a job gone, cancelled or failed is not; one whose chapters another delivery recorded is)."""
    job = repo.get_job(session, job_id, for_update=for_update)
    if job is None or job.job_state not in (JobState.QUEUED, JobState.INGESTING):
        return job is not None and job.job_state == JobState.SYNTHESIZING
    if repo.has_chapters(session, job_id):  # a previous delivery got this far
        repo.move_job(session, job_id, JobState.SYNTHESIZING, only_from=[JobState.QUEUED, JobState.INGESTING])
        return True
    return None


def _record_book(rt: Runtime, session: Session, job: Job, book, chapters) -> None:  # type: ignore[no-untyped-def]
    meta = book.metadata
    job.title = meta.title or job.title
    job.authors = list(meta.authors)
    job.language = meta.language
    job.warnings = list(book.warnings)
    job.book_metadata = {"publisher": meta.publisher, "date": meta.date, "description": meta.description,
                         "cover_path": None, "cover_mime": meta.cover_mime}
    if meta.cover:
        job.book_metadata = {**job.book_metadata,
                             "cover_path": str(rt.artifacts.store_cover(job.id, meta.cover, meta.cover_mime))}
    repo.add_chapters(session, job.id, [(chapter.index, chapter.title, rows) for chapter, rows in chapters])


def _new_sentence(job_id: int, chapter_index: int, sentence: Sentence) -> repo.NewSentence:
    floor, cap = lengths.token_limits(sentence.text)
    return repo.NewSentence(index=sentence.index, paragraph_index=sentence.paragraph_index,
                            text=sentence.text, seed=sentence_seed(job_id, chapter_index, sentence.index),
                            min_new_tokens=floor, max_new_tokens=cap)


def sentence_seed(job_id: int, chapter_index: int, sentence_index: int) -> int:
    """A stable per-sentence seed: a retried or re-batched sentence sounds the same."""
    return zlib.crc32(f"{job_id}:{chapter_index}:{sentence_index}".encode()) & 0x7FFFFFFF


# ---------------------------------------------------------------- plan


def plan_pending(rt: Runtime, job_ids: Sequence[int] | None = None) -> list[int]:
    """Cut every unplanned sentence of active jobs into batches (sorted globally by length).

    With nothing to plan (a plan message after the ingest task planned its book itself) it returns
    after one read, without queueing for SQLite's write lock behind other books' writes."""
    with rt.read_session() as session:
        if not repo.has_unplanned_sentences(session, job_ids):
            return []
    with rt.session() as session:
        sentences = repo.unplanned_sentences(session, job_ids)
        if not sentences:
            session.commit()
            return []
        priorities = repo.job_priorities(session, {s.job_id for s in sentences})
        planned = [PlannedSentence(id=s.id, max_new_tokens=s.max_new_tokens,
                                   prompt_tokens=estimated_prompt_tokens(s.text),
                                   priority=priorities.get(s.job_id, 0))
                   for s in sentences]
        limits, memory = plan_limits(rt.settings, live_synthesis_workers(session))
        # another book still being read will add batches behind these: they are not the queue's end
        limits = replace(limits, ends_queue=repo.jobs_being_read(session) == 0)
        batches = repo.create_batches(session, plan_batches(planned, limits, memory))
        session.commit()
        ids = [b.id for b in batches]
        log.info("planned %d sentences into %d batches", len(planned), len(ids))
        return ids


WORKER_ALIVE_SECONDS = 3600  # a synthesis worker not seen for this long no longer shapes batches


def live_synthesis_workers(session: Session) -> list[Any]:
    from datetime import timedelta

    from storage.models import utcnow

    return repo.live_workers(session, utcnow() - timedelta(seconds=WORKER_ALIVE_SECONDS))


def plan_limits(settings: Settings, workers: Sequence[Any] = ()) -> tuple[PlanLimits, MemoryModel]:
    """Batch limits for the smallest live synthesis worker: its memory cap, its calibrated memory
    model and the batch size at which it last ran out of memory; and how many workers share them.

    With no worker registered yet (the first book of a fresh cluster) the planner assumes an
    80 GB-class card; a worker halves any batch that does not fit, so optimism costs time, not jobs.
    """
    gpu = settings.device.startswith("cuda") or any(w.device.startswith("cuda") for w in workers)
    max_rows = batch_rows(settings, gpu)
    learned = [w.max_rows for w in workers if w.max_rows]
    if learned:
        max_rows = min(max_rows, *learned)
    capped = [w for w in workers if w.memory_cap_bytes]
    sharing = max(1, len(workers))
    if not capped:
        return PlanLimits(memory_cap_bytes=int(80e9 * settings.memory_fraction), max_rows=max_rows,
                          workers=sharing), MemoryModel()
    smallest = min(capped, key=lambda w: w.memory_cap_bytes)
    memory = MemoryModel(fixed_bytes=smallest.fixed_bytes,
                         bytes_per_row_position=smallest.bytes_per_row_position)
    return PlanLimits(memory_cap_bytes=smallest.memory_cap_bytes, max_rows=max_rows, workers=sharing), memory


def batch_rows(settings: Settings, gpu: bool) -> int:
    """Most sentences in one batch: TTS_JOBS_MAX_BATCH, else 1024 on a GPU (continuous batching
    keeps a big pool's slots full; docs/benchmarks.md, issue 6) and 16 on a CPU."""
    return settings.max_batch or (1024 if gpu else 16)


def device_memory_bytes(engine: Engine) -> int | None:
    """Total memory of the engine's GPU (None on CPU). torch is already loaded by the engine."""
    if not engine.device.startswith("cuda"):
        return None
    import torch

    return int(torch.cuda.get_device_properties(torch.device(engine.device)).total_memory)


def register_synthesis_worker(rt: Runtime, engine: Engine, name: str, device_memory: int | None) -> None:
    """Announce a synthesis worker's device, precision, memory cap and calibration to the planner."""
    memory = engine.memory_model()
    cap = int(device_memory * rt.settings.memory_fraction) if device_memory else None
    with rt.session() as session:
        repo.register_worker(session, name, device=engine.device, precision=engine.precision,
                             model_dir=str(engine.model_root), memory_cap_bytes=cap,
                             fixed_bytes=memory.fixed_bytes,
                             bytes_per_row_position=memory.bytes_per_row_position, max_rows=None)
        session.commit()


def estimated_prompt_tokens(text: str) -> int:
    # One token per character plus upstream's control tokens ([Stts][spk_emb][speed_5]...[Ptts]).
    return len(text) + 8


# ---------------------------------------------------------------- synthesize


VoiceResolver = Callable[[str], str]


def synthesize_batch(rt: Runtime, engine: Engine, batch_id: int, worker: str,
                     learned_by: str | None = None) -> list[int]:
    """Speak one batch and record every sentence's audio. Returns the jobs now ready to assemble.

    A batch held by a live lease elsewhere (a duplicate delivery) is left alone; a batch whose lease
    expired (its worker died) is taken over. Results are kept only while this worker holds the lease.
    """
    claimed, ready = claim_batch(rt, batch_id, worker, take_over_dead=True)
    if claimed is None:
        return ready
    return speak_claimed_batch(rt, engine, claimed, worker, learned_by)


@dataclass(frozen=True)
class ClaimedBatch:
    """A batch this worker holds the lease of, and the sentences it has left to speak."""

    batch_id: int
    attempts: int
    work: list[SentenceWork]

    @property
    def refines(self) -> bool:
        return any(w.refine for w in self.work)


def claim_batch(rt: Runtime, batch_id: int, worker: str, take_over_dead: bool = False
                ) -> tuple[ClaimedBatch | None, list[int]]:
    """Lease batch ``batch_id`` for ``worker`` with its pending sentences. None when there is
    nothing to speak: held elsewhere, failed for good after too many attempts, or finished now
    because nothing in it was left (then with the jobs that this made ready to assemble)."""
    settings = rt.settings
    with rt.session() as session:
        batch = repo.claim_batch(session, batch_id, worker, settings.lease_seconds)
        if batch is None and take_over_dead:
            batch = _take_over_from_dead_local_worker(session, batch_id, worker)
        if batch is None:
            session.commit()
            log.info("batch=%s: finished or leased elsewhere; nothing to do", batch_id)
            return None, []
        if batch.attempts > settings.max_attempts:  # every earlier attempt died with its worker
            _fail_batch_for_good(session, batch_id, f"its worker process died {batch.attempts - 1} times "
                                 "while speaking it (out of memory? try a smaller TTS_JOBS_MAX_BATCH)")
            session.commit()
            return None, []
        attempts = batch.attempts
        session.commit()
    with rt.read_session() as session:  # leased now: read without holding the write lock
        sentences = repo.batch_pending_sentences(session, batch_id)
        jobs = {s.job_id: repo.get_job(session, s.job_id) for s in sentences}
        work = [SentenceWork.from_row(s, jobs[s.job_id]) for s in sentences]
    if not work:
        return None, _finish_batch(rt, batch_id, worker)
    return ClaimedBatch(batch_id=batch_id, attempts=attempts, work=work), []


def speak_claimed_batch(rt: Runtime, engine: Engine, claimed: ClaimedBatch, worker: str,
                        learned_by: str | None = None) -> list[int]:
    """Speak a claimed batch on its own (with OOM halving) and record it; returns the jobs ready."""
    batch_id, work = claimed.batch_id, claimed.work
    began = time.monotonic()
    with LeaseKeeper(rt, {batch_id}, worker):
        try:
            audio, synthesized_s = _speak_and_write(rt, engine, work, learned_by)
        except Exception as exc:  # device error, full disk...: give the batch back, or fail it for good
            give_back_or_fail(rt, batch_id, worker, work, claimed.attempts, exc)
            raise
    written = time.monotonic()
    ready = record_batch_results(rt, batch_id, worker, audio)
    log_batch_done(batch_id, audio, synthesized_s, written - began - synthesized_s, time.monotonic() - written)
    return ready


def log_batch_done(batch_id: int, audio: list, synthesized_s: float, written_s: float,  # type: ignore[type-arg]
                   recorded_s: float) -> None:
    seconds = sum(a[2][1] for a in audio if a[2] is not None)
    log.info("batch=%s: %d sentences, %.0f s of audio: synthesized in %.2f s (%.0fx real time), "
             "written in %.2f s, recorded in %.2f s", batch_id, len(audio), seconds, synthesized_s,
             seconds / max(synthesized_s, 1e-9), written_s, recorded_s)


def _speak_and_write(rt: Runtime, engine: Engine, work: list[SentenceWork], learned_by: str | None
                     ) -> tuple[list[tuple[SentenceWork, Any, tuple[str, float] | None]], float]:
    """The batch's audio with every sentence's WAV written, and the seconds synthesis took. Each
    WAV is written as soon as its waveform is on the host, while the GPU goes on with the rest
    of the batch (written after synthesis, they idled the GPU ~0.5 s per batch on an H200)."""
    from pipeline.audio import SentenceWavWriter

    began = time.monotonic()
    with SentenceWavWriter() as writer:
        results = _synthesize_all(engine, _refined(engine, work), _limit_recorder(rt, learned_by),
                                  on_audio=lambda w, wave: write_sentence(rt, writer, w, wave))
        synthesized_s = time.monotonic() - began
        return _write_batch_audio(rt, results, writer), synthesized_s


def _take_over_from_dead_local_worker(session: Session, batch_id: int, worker: str):  # type: ignore[no-untyped-def]
    """A redelivered batch whose lease holder was a process on this host that no longer exists.

    When a worker's child is killed mid-batch, Celery redelivers the message at once; waiting for
    the lease to expire would idle the GPU for minutes. A holder on another host is never presumed dead.
    """
    batch = session.get(repo.Batch, batch_id)
    if batch is None or batch.state != BatchState.RUNNING.value or not batch.leased_by:
        return None
    host, _, pid = batch.leased_by.rpartition(":")
    if host != worker.rpartition(":")[0] or not pid.isdigit() or process_alive(int(pid)):
        return None
    log.warning("batch=%s: its worker %s died; taking it over", batch_id, batch.leased_by)
    return repo.take_over_batch(session, batch_id, worker, batch.leased_by)


def process_alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class SentenceWork:
    sentence_id: int
    job_id: int
    chapter_index: int
    index: int
    request: SynthesisRequest

    refine: bool = False  # the job asked for upstream's refine pass (pauses, breaths)

    @classmethod
    def from_row(cls, s, job: Job) -> SentenceWork:  # type: ignore[no-untyped-def]
        return cls(sentence_id=s.id, job_id=s.job_id, chapter_index=s.chapter.index, index=s.index,
                   request=SynthesisRequest(text=s.text, voice=job.voice_embedding, seed=s.seed,
                                            max_new_tokens=s.max_new_tokens,
                                            min_new_tokens=s.min_new_tokens),
                   refine=bool((job.options or {}).get("refine")))


def _refined(engine: Engine, work: list[SentenceWork]) -> list[SentenceWork]:
    """Run upstream's text-refinement pass, batched, for the sentences of jobs that asked for it."""
    chosen = [w for w in work if w.refine]
    if not chosen:
        return work
    texts = dict(zip((w.sentence_id for w in chosen), engine.refine_texts([w.request.text for w in chosen])))
    return [replace(w, request=replace(w.request, text=texts[w.sentence_id])) if w.refine else w for w in work]


def _limit_recorder(rt: Runtime, worker: str | None) -> Callable[[int], None] | None:
    """Remember, for the planner, the batch size this worker had to halve to after running out of memory."""
    if worker is None:
        return None

    def record(rows: int) -> None:
        with rt.session() as session:
            repo.lower_worker_max_rows(session, worker, rows)
            session.commit()
        log.warning("worker %s: out of memory; batches capped at %d rows from now on", worker, rows)

    return record


def _synthesize_all(engine: Engine, work: list[SentenceWork],
                    on_split: Callable[[int], None] | None = None,
                    on_audio: Callable[[SentenceWork, Any], None] | None = None) -> list[tuple[SentenceWork, Any]]:
    """Synthesise with OOM halving; a sentence too large even alone is returned as its error.
    ``on_audio(work, waveform)``: each sentence's waveform as soon as the engine has it."""
    from pipeline.engine import synthesize_with_oom_halving

    requests = [with_voice(engine, w.request) for w in work]
    on_waveform = None if on_audio is None else (lambda index, wave: on_audio(work[index], wave))
    try:
        return list(zip(work, synthesize_with_oom_halving(engine, requests, on_split=on_split,
                                                          on_waveform=on_waveform)))
    except SentenceTooLargeError as exc:
        if len(work) == 1:
            return [(work[0], SentenceTooLargeError(
                f"{exc}: the sentence {work[0].request.text[:60]!r} does not fit on this device; "
                "lower TextOptions.max_chars or use a larger GPU"))]
    out: list[tuple[SentenceWork, Any]] = []
    for w in work:  # isolate the culprit: the others still get their audio
        out.extend(_synthesize_all(engine, [w], on_audio=on_audio))
    return out


_voice_cache: dict[str, str] = {}
_voice_lock = threading.Lock()


def with_voice(engine: Engine, request: SynthesisRequest) -> SynthesisRequest:
    """Turn ``seed:N`` voices into the speaker embedding the engine samples for that seed."""
    if not request.voice.startswith(SEED_VOICE_PREFIX):
        return request
    with _voice_lock:
        if request.voice not in _voice_cache:
            _voice_cache[request.voice] = engine.sample_voice(int(request.voice[len(SEED_VOICE_PREFIX):]))
        return replace(request, voice=_voice_cache[request.voice])


def write_sentence(rt: Runtime, writer: SentenceWavWriter, work: SentenceWork, waveform: Any) -> str:
    """Hand one sentence's WAV to the writer (once per sentence); returns its relative path."""
    relative = rt.artifacts.sentence_audio(work.job_id, work.chapter_index, work.index)
    # root / relative, not resolve(): this runs on the thread that launches Decoder + Vocos, where
    # host time can idle the GPU, and resolve() lstat()s every folder of the path (~60 us, ten
    # times the join). The name is made of numbers: it cannot leave the data directory.
    writer.write(work.sentence_id, rt.artifacts.root / relative, waveform)
    return str(relative)


def _write_batch_audio(rt: Runtime, results: list[tuple[SentenceWork, Any]], writer: SentenceWavWriter
                       ) -> list[tuple[SentenceWork, Any, tuple[str, float] | None]]:
    """Every sentence WAV of the batch written (atomic and durable each; most were handed in
    during synthesis) before anything is recorded; a sentence that failed gets None."""
    paths = {w.sentence_id: write_sentence(rt, writer, w, r.waveform)
             for w, r in results if isinstance(r, SynthesisResult)}
    seconds = writer.seconds()
    return [(w, r, (paths[w.sentence_id], seconds[w.sentence_id]) if w.sentence_id in paths else None)
            for w, r in results]


def record_batch_results(rt: Runtime, batch_id: int, worker: str, audio: list) -> list[int]:  # type: ignore[type-arg]
    with rt.session() as session:
        if not repo.holds_lease(session, batch_id, worker):
            session.commit()
            log.warning("batch=%s: lease lost to another worker; its result is kept instead", batch_id)
            return []
        states = repo.sentence_states(session, [work.sentence_id for work, _, _ in audio])
        open_rows = [(w, r, written) for w, r, written in audio
                     if states.get(w.sentence_id, SentenceState.DONE.value) != SentenceState.DONE.value]
        repo.record_spoken_sentences(session, [
            repo.SpokenSentence(work.sentence_id, written[0], written[1], result.gpt_steps, result.hit_limit)
            for work, result, written in open_rows if written is not None])
        for work, result, written in open_rows:
            if written is None:
                repo.fail_sentence(session, session.get(repo.Sentence, work.sentence_id), str(result))
                _fail_job(session, work.job_id, f"chapter {work.chapter_index + 1}, sentence "
                          f"{work.index + 1}: {result}")
        session.commit()
    return _finish_batch(rt, batch_id, worker)


def _finish_batch(rt: Runtime, batch_id: int, worker: str) -> list[int]:
    with rt.session() as session:
        repo.finish_batch(session, batch_id, BatchState.DONE)
        job_ids = repo.batch_job_ids(session, batch_id)
        ready = [j for j in job_ids if _start_assembly_if_complete(session, j)]
        session.commit()
    return ready


def _start_assembly_if_complete(session: Session, job_id: int) -> bool:
    progress = repo.job_progress(session, [job_id])[job_id]
    if progress.total == 0 or progress.done < progress.total:
        return False
    return repo.move_job(session, job_id, JobState.ASSEMBLING, only_from=[JobState.SYNTHESIZING])


def give_back_or_fail(rt: Runtime, batch_id: int, worker: str, work: list[SentenceWork],
                       attempts: int, exc: Exception) -> None:
    """A batch that keeps failing fails its jobs after ``max_attempts``; otherwise it is retried."""
    reason = f"{type(exc).__name__}: {exc}"
    with rt.session() as session:
        if attempts >= rt.settings.max_attempts:
            _fail_batch_for_good(session, batch_id, f"synthesis failed {attempts} times: {reason}")
        else:
            repo.release_batch(session, batch_id, worker, reason)
        session.commit()


def _fail_batch_for_good(session: Session, batch_id: int, reason: str) -> None:
    """Give up on a batch: it and every job with sentences in it fail with ``reason``."""
    repo.finish_batch(session, batch_id, BatchState.FAILED, error=reason)
    for job_id in repo.batch_job_ids(session, batch_id):
        _fail_job(session, job_id, reason)


class LeaseKeeper:
    """Renews the leases of ``batch_ids`` from a background thread while the GPU works (a stream
    adds and removes ids as it goes: the set is read under ``lock``)."""

    def __init__(self, rt: Runtime, batch_ids: set[int], worker: str) -> None:
        self._rt, self.batch_ids, self._worker = rt, batch_ids, worker
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{min(batch_ids)}", daemon=True)

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        interval = max(1.0, self._rt.settings.lease_seconds / 5)
        while not self._stop.wait(interval):
            with self.lock:
                batch_ids = sorted(self.batch_ids)
            try:
                with self._rt.session() as session:
                    for batch_id in batch_ids:
                        repo.renew_lease(session, batch_id, self._worker)
                    session.commit()
            except Exception:  # a database blip must not kill the batch; the next beat retries
                log.warning("batches %s: lease renewal failed", batch_ids, exc_info=True)


def requeue_stale_batches(rt: Runtime) -> list[int]:
    """Batches whose worker went silent (host crash, OOM kill): sent out again by live workers."""
    with rt.session() as session:
        stale = repo.stale_batches(session, rt.settings.lease_seconds)
        session.commit()
    return stale


# ---------------------------------------------------------------- assemble


def assemble_job(rt: Runtime, job_id: int) -> list[Path]:
    """Stitch a finished job's sentence audio into its audiobook files. Idempotent.

    No database transaction stays open while the audio is stitched and encoded (seconds to
    minutes): on SQLite every transaction holds the write lock (BEGIN IMMEDIATE), and GPU
    workers could not record their batches meanwhile — on two H200s each stalled 12-14 s per
    assembled book (docs/benchmarks.md). What assembly needs is read first, the result is
    recorded after, and only if the job is still assembling (a cancel may come in between)."""
    from pipeline.audio import AssemblyOptions, start_helpers, stitch_helpers_wanted

    began = time.monotonic()
    with rt.read_session() as session:  # the other book's assembly reads beside it, not after
        job = repo.get_job(session, job_id)
        if job is None or job.job_state != JobState.ASSEMBLING:
            outputs = [Path(p) for p in job.outputs] if job is not None else []
            session.commit()
            return outputs
        options = AssemblyOptions(formats=tuple(job.options.get("formats", ["m4b"])), narrator=job.voice_name)
        # stitch helpers missing from this process start now (imports: ~1 s) while the sentences are read
        start_helpers(stitch_helpers_wanted(options, repo.chapter_count(session, job_id)))
        chapters = _chapters_to_assemble(rt, session, job_id)
        metadata = _book_metadata(rt, job)
        out_dir = Path(job.options["out_dir"]) if job.options.get("out_dir") else \
            rt.artifacts.default_output_dir(job_id)
        session.commit()
    log.info("job=%s: read %d sentences of %d chapters in %.2f s", job_id,
             sum(len(c.sentences) for c in chapters), len(chapters), time.monotonic() - began)
    report = _assemble_in_work_dir(rt, job_id, chapters, metadata, out_dir, options)
    with rt.session() as session:
        job = repo.get_job(session, job_id)
        if job is None or not repo.move_job(session, job_id, JobState.DONE, only_from=[JobState.ASSEMBLING]):
            session.commit()
            log.warning("job=%s: no longer assembling (cancelled meanwhile?); its files stay in %s",
                        job_id, out_dir)
            return list(report.outputs)
        job.outputs = [str(p) for p in report.outputs]
        job.report = {"total_seconds": round(report.total_seconds, 3),
                      "sentence_seconds": round(report.sentence_seconds, 3),
                      "pause_seconds": round(report.pause_seconds, 3),
                      "chapters": [{"title": c.title, "start_seconds": round(c.start_seconds, 3),
                                    "seconds": round(c.seconds, 3)} for c in report.chapters]}
        session.commit()
    log.info("job=%s: done, %.1f s of audio in %s", job_id, report.total_seconds,
             ", ".join(str(p) for p in report.outputs))
    return list(report.outputs)


def _chapters_to_assemble(rt: Runtime, session: Session, job_id: int) -> list[Any]:
    """The job's chapters with their sentence WAVs in reading order (sentences without audio left out)."""
    from pipeline.audio import ChapterAudio, SentenceAudio

    audio = repo.job_sentence_audio(session, job_id)
    chapters = []
    for chapter in repo.job_chapters(session, job_id):
        rows = audio.get(chapter.id, [])
        paths = rt.artifacts.resolve_many([path for path, _ in rows])
        sentences = tuple(SentenceAudio(path=path, paragraph_index=paragraph)
                          for path, (_, paragraph) in zip(paths, rows, strict=True))
        chapters.append(ChapterAudio(index=chapter.index, title=chapter.title, sentences=sentences))
    return chapters


def _assemble_in_work_dir(rt: Runtime, job_id: int, chapters: list[Any], metadata: BookMetadata,
                          out_dir: Path, options: Any) -> Any:
    """assemble_audiobook in the job's emptied work directory (removed after); fails the job
    with the assembly's message."""
    from pipeline.audio import assemble_audiobook

    work_dir = rt.artifacts.work_dir(job_id)
    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir(parents=True, exist_ok=True)
    try:
        return assemble_audiobook(chapters, metadata, out_dir, work_dir, options)
    except AssemblyError as exc:
        fail_job(rt, job_id, str(exc))
        raise
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _book_metadata(rt: Runtime, job: Job) -> BookMetadata:
    meta = job.book_metadata or {}
    cover = None
    if meta.get("cover_path"):
        cover = rt.artifacts.resolve(meta["cover_path"]).read_bytes()
    return BookMetadata(title=job.title, authors=tuple(job.authors), language=job.language,
                        publisher=meta.get("publisher", ""), date=meta.get("date", ""),
                        description=meta.get("description", ""), cover=cover,
                        cover_mime=meta.get("cover_mime", ""))


# ---------------------------------------------------------------- the embedded default


def run_book(rt: Runtime, path: Path, options: JobOptions, engine: Engine,
             on_progress: Callable[[int, int], None] | None = None) -> int:
    """The whole job in this process: submit, ingest, plan, synthesize every batch, assemble.

    Returns the job id; the job ends done or failed (never left running), see `job_statuses`.
    """
    import socket

    job_id = submit_book(rt, path, options)
    worker = f"embedded@{socket.gethostname()}"
    try:
        register_synthesis_worker(rt, engine, worker, device_memory_bytes(engine))
        if not ingest_job(rt, job_id):
            return job_id
        for batch_id in plan_pending(rt, [job_id]):
            synthesize_batch(rt, engine, batch_id, worker="embedded", learned_by=worker)
            if on_progress:
                status = job_statuses(rt, job_id)[0]
                on_progress(status.sentences_done, status.sentences_total)
        assemble_job(rt, job_id)
    except AssemblyError:
        pass  # already recorded on the job
    except BaseException as exc:
        with rt.session() as session:
            _fail_job(session, job_id, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
            session.commit()
        raise
    return job_id


# ---------------------------------------------------------------- cancel / retry / fail


def _fail_job(session: Session, job_id: int, error: str) -> None:
    if repo.move_job(session, job_id, JobState.FAILED, only_from=JobState.active(), error=error):
        log.error("job=%s: failed: %s", job_id, error)


def fail_job(rt: Runtime, job_id: int, error: str) -> None:
    """End a job that hit an error nobody will retry, so it never looks as if it were still running."""
    with rt.session() as session:
        _fail_job(session, job_id, error)
        session.commit()


def cancel_job(rt: Runtime, job_id: int) -> bool:
    with rt.session() as session:
        moved = repo.move_job(session, job_id, JobState.CANCELLED, only_from=JobState.active(),
                              error="cancelled by the user")
        session.commit()
        return moved


@dataclass(frozen=True)
class RetryPlan:
    """What a retried job needs next: ``ingest``, ``plan`` or ``assemble``."""

    job_id: int
    next_step: str
    sentences_reset: int = 0


def retry_job(rt: Runtime, job_id: int) -> RetryPlan:
    """Re-queue only what is missing or failed; sentences with audio are kept."""
    with rt.session() as session:
        job = repo.get_job(session, job_id)
        if job is None:
            raise TtsJobsError(f"no job {job_id}: see `tts-jobs status`")
        if job.job_state not in (JobState.FAILED, JobState.CANCELLED):
            raise TtsJobsError(f"job {job_id} is {job.state}; only failed or cancelled jobs can be retried")
        job.error = None
        job.finished_at = None
        if not repo.has_chapters(session, job_id):
            job.state = JobState.QUEUED.value
            step, reset = "ingest", 0
        else:
            reset = repo.reset_failed_sentences(session, job_id)
            progress = repo.job_progress(session, [job_id])[job_id]
            complete = progress.done == progress.total
            job.state = (JobState.ASSEMBLING if complete else JobState.SYNTHESIZING).value
            step = "assemble" if complete else "plan"
        session.commit()
        return RetryPlan(job_id=job_id, next_step=step, sentences_reset=reset)


# ---------------------------------------------------------------- status


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

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        data = asdict(self)
        if data["chapters"] is None:
            del data["chapters"]
        return data


def job_statuses(rt: Runtime, job_id: int | None = None) -> list[JobStatus]:
    with rt.session() as session:
        if job_id is not None:
            job = repo.get_job(session, job_id)
            if job is None:
                raise TtsJobsError(f"no job {job_id}: see `tts-jobs status` for the list")
            jobs = [job]
        else:
            jobs = repo.list_jobs(session)
        progress = repo.job_progress(session, [j.id for j in jobs])
        speeds = _recent_speeds(session, [j.id for j in jobs if j.job_state == JobState.SYNTHESIZING])
        statuses = []
        for job in jobs:
            p = progress[job.id]
            speed = speeds.get(job.id)
            chapters = None
            if job_id is not None:
                chapters = [{"index": c.index, "title": c.title, "sentences": n, "sentences_done": d,
                             "audio_seconds": round(s, 2)}
                            for c, n, d, s in repo.chapter_progress(session, job.id)]
            statuses.append(JobStatus(
                id=job.id, title=job.title, state=job.state, sentences_total=p.total,
                sentences_done=p.done, sentences_failed=p.failed, audio_seconds=round(p.audio_seconds, 2),
                sentences_hit_limit=p.hit_limit, outputs=list(job.outputs), report=dict(job.report or {}),
                error=job.error,
                source=job.source_name, voice=job.voice_name, warnings=list(job.warnings),
                x_realtime=round(speed, 2) if speed else None, eta_seconds=_eta(p, speed),
                chapters=chapters))
        return statuses


THROUGHPUT_WINDOW_SECONDS = 300


def _recent_speeds(session: Session, job_ids: list[int]) -> dict[int, float]:
    from datetime import timedelta

    from storage.models import utcnow

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

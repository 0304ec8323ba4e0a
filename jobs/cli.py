"""The `tts-jobs` command line. Each command parses, calls a use case, and reports.

Heavy modules (torch, ChatTTS, Celery) are imported inside the commands that need them, so
`tts-jobs status` starts instantly.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from jobs import service
from jobs.settings import Settings
from pipeline.errors import BookError, TtsJobsError

app = typer.Typer(help="Batch audiobook factory: books in, ChatTTS-read audiobooks out.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
db_app = typer.Typer(help="Database schema.", no_args_is_help=True)
model_app = typer.Typer(help="ChatTTS weights.", no_args_is_help=True)
voice_app = typer.Typer(help="Named voices (speaker embeddings).", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(model_app, name="model")
app.add_typer(voice_app, name="voice")

log = logging.getLogger("tts_jobs")

EXIT_BAD_INPUT = 2

FormatOpt = Annotated[Optional[list[str]], typer.Option(
    "--format", "-f", help="Output format(s): m4b, mp3, ogg, flac, wav (repeat or comma-separate).")]
VoiceOpt = Annotated[str, typer.Option("--voice", help="Voice name (see `tts-jobs voice list`).")]
OutOpt = Annotated[Optional[Path], typer.Option("--out", help="Folder for the finished audiobook.")]
ModelDirOpt = Annotated[Optional[Path], typer.Option(
    "--model-dir", help="ChatTTS weights (upstream layout); default TTS_JOBS_MODEL_DIR, else the HF cache.")]


def main() -> None:
    """Console entry point: one-line errors, no tracebacks for problems the user can fix."""
    _configure_logging()
    try:
        app()
    except BookError as exc:
        _fail(str(exc), EXIT_BAD_INPUT)
    except TtsJobsError as exc:
        _fail(str(exc), 1)


def _fail(message: str, code: int) -> None:
    typer.echo(f"error: {message}", err=True)
    raise SystemExit(code)


def _configure_logging() -> None:
    level = os.environ.get("TTS_JOBS_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(level=getattr(logging, level, logging.INFO), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("ChatTTS", "httpx", "numba", "urllib3", "transformers", "alembic"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _settings(**overrides: object) -> Settings:
    return Settings.from_env().with_overrides(**overrides)


def _formats(values: list[str] | None) -> tuple[str, ...]:
    if not values:
        return ("m4b",)
    return tuple(f.strip().lower() for v in values for f in v.split(",") if f.strip())


# ---------------------------------------------------------------- run / submit


@app.command()
def run(
    book: Annotated[Path, typer.Argument(help="The book: .epub, .txt, .md or .html.")],
    out: OutOpt = None,
    fmt: FormatOpt = None,
    model_dir: ModelDirOpt = None,
    voice: VoiceOpt = service.DEFAULT_VOICE,
    device: Annotated[Optional[str], typer.Option(help="auto, cpu, cuda, cuda:N")] = None,
    precision: Annotated[Optional[str], typer.Option(help="auto, fp32, fp16, bf16, int8")] = None,
    refine: Annotated[bool, typer.Option("--refine", help="ChatTTS's refine pass: pauses, breaths.")] = False,
) -> None:
    """Convert one book here and now (embedded default: SQLite, no servers). Prints the output path."""
    from pipeline.engine import EngineConfig, load_engine

    settings = _settings(model_dir=model_dir, device=device, precision=precision)
    rt = service.open_runtime(settings)
    options = service.JobOptions(formats=_formats(fmt), out_dir=out.resolve() if out else None, voice=voice,
                                 refine=refine)
    service.validate_book(book)  # fail fast, before the model loads
    engine = load_engine(EngineConfig(model_dir=settings.model_dir, device=settings.device,
                                      precision=settings.precision))
    with _progress(f"Reading {book.name}") as on_progress:
        job_id = service.run_book(rt, book, options, engine, on_progress)
    status = service.job_statuses(rt, job_id)[0]
    if status.state != "done":
        _fail(f"job {job_id} {status.state}: {status.error}", 1)
    for path in status.outputs:
        typer.echo(path)


@app.command()
def submit(
    books: Annotated[list[Path], typer.Argument(help="One or more books.")],
    priority: Annotated[int, typer.Option(help="Higher runs first.")] = 0,
    fmt: FormatOpt = None,
    voice: VoiceOpt = service.DEFAULT_VOICE,
    out: OutOpt = None,
    refine: Annotated[bool, typer.Option("--refine", help="ChatTTS's refine pass: pauses, breaths.")] = False,
) -> None:
    """Record books as jobs and queue them for the workers. Prints one job id per book."""
    from jobs import tasks

    rt = service.open_runtime(_settings())
    options = service.JobOptions(formats=_formats(fmt), out_dir=out.resolve() if out else None,
                                 voice=voice, priority=priority, refine=refine)
    tasks.connect_to_broker()  # now, not between recording the first job and queueing it
    failed = False
    for book in books:
        try:
            job_id = service.submit_book(rt, book, options)
        except TtsJobsError as exc:
            typer.echo(f"error: {exc}", err=True)
            failed = True
            continue
        tasks.send_ingest(job_id)
        typer.echo(job_id)
    if failed:
        raise typer.Exit(EXIT_BAD_INPUT)


# ---------------------------------------------------------------- status / cancel / retry


@app.command()
def status(
    job: Annotated[Optional[int], typer.Argument(help="A job id for the per-chapter detail.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="Refresh every 2 seconds until Ctrl-C.")] = False,
) -> None:
    """All jobs, or one job in detail, with progress, throughput and ETA."""
    rt = service.open_runtime(_settings())
    if watch and not as_json:
        _watch_status(rt, job)
        return
    statuses = service.job_statuses(rt, job)
    if as_json:
        payload = [s.to_json() for s in statuses]
        typer.echo(json.dumps(payload[0] if job is not None else payload, indent=2))
        return
    _print_status_table(statuses)
    if job is not None and statuses[0].chapters:
        _print_chapters(statuses[0])


def _print_status_table(statuses: list[service.JobStatus]) -> None:
    from rich.console import Console

    Console().print(_status_table(statuses))


def _status_table(statuses: list[service.JobStatus]):  # type: ignore[no-untyped-def]
    from rich.progress_bar import ProgressBar
    from rich.table import Table

    table = Table("id", "title", "state", "progress", "sentences", "audio", "speed", "ETA", "output / error")
    for s in statuses:
        bar = ProgressBar(total=max(s.sentences_total, 1), completed=s.sentences_done, width=20)
        speed = f"{s.x_realtime:.1f}× real time" if s.x_realtime else ""
        eta = _duration(s.eta_seconds) if s.eta_seconds is not None else ""
        note = s.error if s.error else ", ".join(s.outputs)
        table.add_row(str(s.id), s.title, s.state, bar, f"{s.sentences_done}/{s.sentences_total}",
                      _duration(s.audio_seconds), speed, eta, note)
    return table


def _watch_status(rt: service.Runtime, job: int | None) -> None:
    import time

    from rich.live import Live

    with Live(_status_table(service.job_statuses(rt, job)), refresh_per_second=1) as live:
        try:
            while True:
                time.sleep(2)
                live.update(_status_table(service.job_statuses(rt, job)))
        except KeyboardInterrupt:
            pass


def _print_chapters(s: service.JobStatus) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table("#", "chapter", "sentences", "audio")
    for c in s.chapters or []:
        table.add_row(str(c["index"] + 1), c["title"], f"{c['sentences_done']}/{c['sentences']}",
                      _duration(c["audio_seconds"]))
    Console().print(table)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


@app.command()
def cancel(job: Annotated[int, typer.Argument(help="Job id.")]) -> None:
    """Stop a job; its finished sentence audio is kept for a later retry."""
    rt = service.open_runtime(_settings())
    if not service.cancel_job(rt, job):
        _fail(f"job {job} is not running (see `tts-jobs status {job}`)", 1)
    typer.echo(f"cancelled {job}")


@app.command()
def retry(job: Annotated[int, typer.Argument(help="Job id.")]) -> None:
    """Re-queue only what is missing or failed of a failed or cancelled job."""
    from jobs import tasks

    rt = service.open_runtime(_settings())
    plan = service.retry_job(rt, job)
    tasks.enqueue_next(plan)
    typer.echo(f"retrying {job}: {plan.next_step} ({plan.sentences_reset} sentences re-queued)")


# ---------------------------------------------------------------- worker


@app.command()
def worker(
    queues: Annotated[Optional[str], typer.Option(help="Comma-separated: cpu, synth (default: both).")] = None,
    concurrency: Annotated[int, typer.Option(help="Processes (keep 1 for a GPU worker).")] = 1,
    gpu: Annotated[Optional[int], typer.Option(help="Pin to GPU N: synthesis only, named gpuN@host.")] = None,
    gpus: Annotated[Optional[str], typer.Option(help="'all' or a list like 0,1: one pinned worker per GPU.")] = None,
    cpu: Annotated[bool, typer.Option("--cpu", help="Ingestion, planning and assembly only.")] = False,
    name: Annotated[Optional[str], typer.Option(help="Worker name (default tts@HOST).")] = None,
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
) -> None:
    """Start a Celery worker for this app. With no options it serves every queue."""
    from jobs import workers

    if gpus is not None:
        raise SystemExit(workers.supervise_gpu_workers(workers.parse_gpu_list(gpus), loglevel))
    spec = workers.worker_spec(queues=queues, concurrency=concurrency, gpu=gpu, cpu=cpu, name=name)
    workers.run_worker(spec, loglevel)


# ---------------------------------------------------------------- inspect


@app.command()
def inspect(
    book: Annotated[Path, typer.Argument(help="The book to read.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    sentences: Annotated[bool, typer.Option("--sentences", help="List each chapter's sentences.")] = False,
) -> None:
    """Show what would be read: metadata, chapters, sentences, estimated duration, warnings."""
    from pipeline.lengths import estimated_seconds
    from pipeline.text import split_sentences

    parsed = service.validate_book(book)
    chapters = []
    for chapter in parsed.chapters:
        spoken = split_sentences(chapter)
        entry = {"title": chapter.title, "sentences": len(spoken),
                 "characters": sum(len(s.text) for s in spoken),
                 "estimated_seconds": round(sum(estimated_seconds(s.text) for s in spoken), 1)}
        if sentences:
            entry["sentence_texts"] = [s.text for s in spoken]
        chapters.append(entry)
    meta = parsed.metadata
    report = {"title": meta.title, "authors": list(meta.authors), "language": meta.language,
              "publisher": meta.publisher, "date": meta.date, "has_cover": meta.cover is not None,
              "chapters": chapters, "warnings": list(parsed.warnings)}
    if as_json:
        typer.echo(json.dumps(report, ensure_ascii=False, indent=2))
        return
    _print_inspection(report, sentences)


def _print_inspection(report: dict, sentences: bool) -> None:  # type: ignore[type-arg]
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{report['title']}[/bold] — {', '.join(report['authors']) or 'unknown author'}"
                  f" ({report['language'] or 'language unknown'})")
    table = Table("#", "chapter", "sentences", "characters", "est. duration")
    for i, c in enumerate(report["chapters"], 1):
        table.add_row(str(i), c["title"], str(c["sentences"]), str(c["characters"]),
                      _duration(c["estimated_seconds"]))
    console.print(table)
    total = sum(c["estimated_seconds"] for c in report["chapters"])
    console.print(f"estimated audio: {_duration(total)}")
    for warning in report["warnings"]:
        console.print(f"[yellow]warning:[/yellow] {warning}")
    if sentences:
        for i, c in enumerate(report["chapters"], 1):
            console.print(f"\n[bold]{i}. {c['title']}[/bold]")
            for text in c["sentence_texts"]:
                console.print(f"  {text}")


# ---------------------------------------------------------------- db / model / voice


@db_app.command("upgrade")
def db_upgrade(revision: Annotated[str, typer.Argument(help="Target revision.")] = "head") -> None:
    """Apply Alembic migrations up to REVISION."""
    from storage.db import upgrade

    settings = _settings()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    upgrade(settings.database_url, revision)
    typer.echo(f"database at {revision}")


@model_app.command("synthetic")
def model_synthetic(
    target: Annotated[Path, typer.Argument(help="Folder to write the weights into.")],
    size: Annotated[str, typer.Option(help="tiny (CPU tests) or full (upstream widths).")] = "tiny",
    seed: Annotated[int, typer.Option(help="Random seed: the same seed gives the same weights.")] = 0,
) -> None:
    """Write ChatTTS weights with RANDOM values (they produce noise, never speech)."""
    from pipeline.engine.weights import NOISE_WARNING, write_synthetic_weights

    files = write_synthetic_weights(target, size=size, seed=seed)
    typer.secho(f"!!! {NOISE_WARNING}", fg=typer.colors.RED, bold=True, err=True)
    typer.echo(files.root)


@model_app.command("download")
def model_download(
    target: Annotated[Optional[Path], typer.Option("--dir", help="Cache folder (default: HF cache).")] = None,
) -> None:
    """Fetch the real 2Noise/ChatTTS weights from Hugging Face (needs internet)."""
    from pipeline.engine.weights import download_weights

    typer.echo(download_weights(target))


@voice_app.command("new")
def voice_new(
    name: Annotated[str, typer.Argument(help="Voice name.")],
    seed: Annotated[Optional[int], typer.Option(help="Sample the speaker from this seed.")] = None,
    from_audio: Annotated[Optional[Path], typer.Option(help="A reference recording (WAV).")] = None,
    model_dir: ModelDirOpt = None,
) -> None:
    """Create a named voice from a seed (default: random) or a reference recording."""
    import secrets

    from storage import repo

    settings = _settings(model_dir=model_dir)
    rt = service.open_runtime(settings)
    embedding, source = "", ""
    if from_audio is not None:
        from pipeline.engine import EngineConfig, load_engine

        engine = load_engine(EngineConfig(model_dir=settings.model_dir, device=settings.device,
                                          precision=settings.precision))
        embedding, source = engine.voice_from_audio(from_audio), str(from_audio)
    else:
        seed = seed if seed is not None else secrets.randbelow(2**31)
        source = f"seed {seed}"
    with rt.session() as session:
        if repo.get_voice(session, name) is not None or name == service.DEFAULT_VOICE:
            _fail(f"voice {name!r} exists already: pick another name", 1)
        repo.add_voice(session, name, embedding, seed, source)
        session.commit()
    typer.echo(f"voice {name}: {source}")


@voice_app.command("list")
def voice_list() -> None:
    """The voices books can be read with."""
    from storage import repo

    rt = service.open_runtime(_settings())
    typer.echo(f"{service.DEFAULT_VOICE}\tseed {service.DEFAULT_VOICE_SEED} (built in)")
    with rt.session() as session:
        for voice in repo.list_voices(session):
            typer.echo(f"{voice.name}\t{voice.source}")


# ---------------------------------------------------------------- bench


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
             add_help_option=False)
def bench(ctx: typer.Context) -> None:
    """Measure synthesis speed against upstream ChatTTS in the same run (`tts-jobs bench --help`)."""
    from pipeline.engine import bench as bench_module

    bench_module.main(list(ctx.args))


# ---------------------------------------------------------------- progress


class _progress:
    """A progress bar on a terminal; plain log lines otherwise."""

    def __init__(self, label: str) -> None:
        self.label = label
        self._bar = None
        self._task = None
        self._last_logged = -1

    def __enter__(self):  # type: ignore[no-untyped-def]
        if sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

            self._bar = Progress("{task.description}", BarColumn(), MofNCompleteColumn(),
                                 TimeRemainingColumn(), transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=None)
        return self.update

    def update(self, done: int, total: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done, total=total)
            return
        percent = int(100 * done / total) if total else 100
        if percent // 10 != self._last_logged // 10:
            self._last_logged = percent
            log.info("%s: %d/%d sentences (%d%%)", self.label, done, total, percent)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


from jobs import cli_ops  # noqa: E402 - operations commands: flower, bulk

cli_ops.register(app)

if __name__ == "__main__":
    main()

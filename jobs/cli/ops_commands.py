"""Operations commands: `worker`, `flower`, `db upgrade`, `model ...`, `voice ...`, `bench`.
Each parses, calls a use case of jobs/ and reports; `jobs/cli/main.py` registers them."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Optional

import typer

from jobs import admin
from jobs.choices import voices
from jobs.cli.book_commands import EXIT_BAD_INPUT, ModelDirOpt
from jobs.cli.progress import silence_dependency_bars
from jobs.cluster.flower import DEFAULT_PORT, LOOPBACK, FlowerConfigError, FlowerOptions, run_flower
from jobs.settings import Settings, flower_environment, memory_gib_option

# The use cases (Celery, the database, the engine) are imported inside the commands that call
# them (see book_commands.py).

# ---------------------------------------------------------------- worker / flower


def worker(
    queues: Annotated[Optional[str], typer.Option(
        metavar="QUEUES", help="Comma-separated: cpu, synth (default: both).")] = None,
    concurrency: Annotated[int, typer.Option(help="Processes (keep 1 for a GPU worker).")] = 1,
    gpu: Annotated[Optional[int], typer.Option(help="Pin to GPU N: synthesis only, named gpuN@host.")] = None,
    gpus: Annotated[Optional[str], typer.Option(
        metavar="all|0,1", help="'all' or a list like 0,1: one pinned worker per GPU.")] = None,
    cpu: Annotated[bool, typer.Option("--cpu", help="Ingestion, planning and assembly only.")] = False,
    name: Annotated[Optional[str], typer.Option(
        metavar="NAME", help="Worker name (default tts@HOST).")] = None,
    loglevel: Annotated[str, typer.Option(metavar="LEVEL", help="Celery log level.")] = "INFO",
    memory_gib: Annotated[Optional[float], typer.Option(
        "--memory-gib", metavar="GIB", show_default="TTS_JOBS_MEMORY_GIB, else the whole card",
        help="The most GPU memory each synthesis worker uses (a hard cap).")] = None,
) -> None:
    """Start a Celery worker for this app. With no options it serves every queue."""
    from jobs.cluster import workers
    from jobs.runtime import check_engine_settings

    silence_dependency_bars()  # a log file is no place for "Loading weights" bars
    settings = Settings.from_env().with_overrides(memory_gib=memory_gib_option(memory_gib))
    check_engine_settings(settings, weights=False)
    if gpus is not None:
        gpu_ids = workers.parse_gpu_list(gpus, settings.visible_gpus)
        raise SystemExit(workers.supervise_gpu_workers(gpu_ids, loglevel, settings))
    spec = workers.worker_spec(queues=queues, concurrency=concurrency, gpu=gpu, cpu=cpu, name=name)
    if workers.assembles(spec):  # an ffmpeg that cannot make an M4B could finish no book: refused now
        from pipeline.audio.ffmpeg_check import check_for_worker

        check_for_worker(logging.getLogger("tts_jobs").warning)
    raise SystemExit(workers.run_worker(spec, loglevel, settings))


def flower(
    port: Annotated[int, typer.Option(help="Port of the web UI and API.")] = DEFAULT_PORT,
    address: Annotated[str, typer.Option(
        metavar="ADDRESS", help="Interface to bind (0.0.0.0 inside a container).")] = LOOPBACK,
    local: Annotated[bool, typer.Option(
        "--local", help="Run without FLOWER_BASIC_AUTH, reachable from this machine only (127.0.0.1).")] = False,
    allow_control: Annotated[bool, typer.Option(
        "--allow-control", help="Let the UI/API shut down workers and revoke tasks (default: read-only).")] = False,
    state_file: Annotated[Optional[Path], typer.Option(
        metavar="FILE", help="Keep Flower's task history in this file.")] = None,
    url_prefix: Annotated[Optional[str], typer.Option(
        metavar="PREFIX", help="Serve under /PREFIX/ behind a reverse proxy.")] = None,
) -> None:
    """Monitor the workers in a browser (Celery Flower). Needs FLOWER_BASIC_AUTH=user:password."""
    options = FlowerOptions(port=port, address=address, local=local, allow_control=allow_control,
                            state_file=state_file, url_prefix=url_prefix)
    try:
        code = run_flower(options, flower_environment())
    except FlowerConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    raise typer.Exit(code)


# ---------------------------------------------------------------- db / model / voice / bench


def db_upgrade(revision: Annotated[str, typer.Argument(help="Target revision.")] = "head") -> None:
    """Apply Alembic migrations up to REVISION."""
    from jobs.runtime import upgrade_database

    upgrade_database(Settings.from_env(), revision)
    typer.echo(f"database at {revision}")


def model_synthetic(
    target: Annotated[Path, typer.Argument(help="Folder to write the weights into.")],
    size: Annotated[str, typer.Option(
        metavar="tiny|full", help="tiny (CPU tests) or full (upstream widths).")] = "tiny",
    seed: Annotated[int, typer.Option(help="Random seed: the same seed gives the same weights.")] = 0,
) -> None:
    """Write ChatTTS weights with RANDOM values (they produce noise, never speech)."""
    silence_dependency_bars()
    root = admin.write_synthetic_model(target, size=size, seed=seed)
    typer.secho(f"!!! {admin.synthetic_weights_warning()}", fg=typer.colors.RED, bold=True, err=True)
    typer.echo(root)


def model_download(
    target: Annotated[Optional[Path], typer.Option("--dir", help="Cache folder (default: HF cache).")] = None,
) -> None:
    """Fetch the real 2Noise/ChatTTS weights from Hugging Face (needs internet)."""
    typer.echo(admin.download_model(target))


def voice_new(
    name: Annotated[str, typer.Argument(help="Voice name.")],
    seed: Annotated[Optional[int], typer.Option(help="Sample the speaker from this seed.")] = None,
    from_audio: Annotated[Optional[Path], typer.Option(
        metavar="FILE", help="A reference recording (WAV).")] = None,
    sample: Annotated[Optional[Path], typer.Option(
        "--sample", metavar="FILE",
        help="Also write a few sentences in the new voice: .wav, .mp3, .ogg or .flac.")] = None,
    model_dir: ModelDirOpt = None,
) -> None:
    """Create a named voice from a seed (default: random) or a reference recording."""
    from jobs.preview import check_sample_path, voice_sample
    from jobs.runtime import check_engine_settings, open_engine, open_runtime

    silence_dependency_bars()
    settings = Settings.from_env().with_overrides(model_dir=model_dir)
    needs_engine = sample is not None or from_audio is not None
    if needs_engine:
        check_engine_settings(settings)
    rt = open_runtime(settings)
    voices.check_new_voice(rt, name, from_audio)  # the name, the recording and the sample's place
    if sample is not None:  # are checked before the model loads
        check_sample_path(sample, "--sample")
    engine = open_engine(settings) if needs_engine else None
    voice = voices.create_voice(rt, name, seed=seed, from_audio=from_audio, engine=engine)
    typer.echo(f"voice {voice.name}: {voice.source}")
    if engine is not None and sample is not None:
        typer.echo(voice_sample(rt, engine, voice.name, sample).path)


def voice_list() -> None:
    """The voices books can be read with."""
    from jobs.runtime import open_existing_runtime

    rt = open_existing_runtime(Settings.from_env())
    for voice in voices.list_voices(rt) if rt is not None else [voices.builtin_voice()]:
        typer.echo(f"{voice.name}\t{voice.source}")


def bench(ctx: typer.Context) -> None:
    """Measure speed: synthesis against upstream ChatTTS, or the tool named first.

    The same command line as `python -m pipeline.bench` (docs/benchmarks.md); `tts-jobs bench
    --help` lists the tools (assembly, ingest, run-book, workers-scaling, ...)."""
    silence_dependency_bars()
    raise typer.Exit(admin.run_benchmark(list(ctx.args)))

"""What one process needs to run use cases: settings, the database, the artifact store and,
for synthesis, the engine loaded from the same settings."""

from __future__ import annotations

import functools
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from jobs.settings import Settings, keep_tokenizer_threads_off
from pipeline.errors import InputError, ModelError
from storage.artifacts import ArtifactStore
from storage.db import (
    make_engine,
    make_read_session_factory,
    make_session_factory,
    upgrade,
    upgrade_if_behind,
)

if TYPE_CHECKING:
    from pipeline.engine import Engine

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    """Settings, the database and the artifact store of one process."""

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
        upgrade_if_behind(settings.database_url)
    engine = make_engine(settings.database_url)
    return Runtime(settings=settings, sessions=make_session_factory(engine),
                   artifacts=ArtifactStore(settings.data_dir))


def database_file(settings: Settings) -> Path | None:
    """The embedded SQLite file the settings name (None for a database server)."""
    from sqlalchemy.engine import make_url

    url = make_url(settings.database_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database)


def open_existing_runtime(settings: Settings) -> Runtime | None:
    """The runtime of a database that is there already; None where the embedded SQLite file is
    not (a command that only looks creates no database, and no data folder)."""
    path = database_file(settings)
    if path is not None and not path.is_file():
        return None
    return open_runtime(settings)


def upgrade_database(settings: Settings, revision: str = "head") -> None:
    """Apply the schema migrations up to ``revision`` (a cluster does this once per deployment)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    upgrade(settings.database_url, revision)


class EngineLoading:
    """The engine loaded (and, on a GPU, warmed up: kernels compiled, memory model calibrated) on a
    thread of its own, so that a run reads its book meanwhile; ``get()`` waits for it. A daemon thread: a
    run stopped during the load exits without waiting for it."""

    def __init__(self, settings: Settings) -> None:
        self._done = threading.Event()
        self._plannable = threading.Event()  # the memory model known: set before or with _done
        self._engine: Engine | None = None
        self._planning: Engine | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._load, args=(settings,), name="engine-load", daemon=True).start()

    def _load(self, settings: Settings) -> None:
        try:
            began = time.perf_counter()
            if runs_on_gpu(settings):  # the driver makes its context while torch imports
                from pipeline.engine.cuda_context import open_context_beside

                open_context_beside(settings.device, host_wait(settings))
            engine = open_engine(settings)
            loaded = time.perf_counter()
            if engine.device.startswith("cuda"):  # kernels compiled, the memory model calibrated
                if engine.take_kept_calibration(settings.calibration_file):
                    self._planning = engine  # the book is planned while the warm-up batch runs
                    self._plannable.set()
                engine.warm_up(settings.calibration_file)
            log.info("engine loaded in %.1f s, warmed up in %.1f s", loaded - began, time.perf_counter() - loaded)
            self._engine = engine
        except BaseException as exc:  # handed to whoever waits for the engine
            self._error = exc
        finally:
            self._done.set()
            self._plannable.set()

    def for_planning(self) -> Engine:
        """The engine as far as the planner needs it (device, precision, memory model): as soon
        as a memory model kept by an earlier run on this GPU is read, while the warm-up batch
        still runs (0.9-1.0 s on an H200); else once loaded (``get``). Not for speaking."""
        while not self._plannable.wait(0.2):  # in slices: Ctrl-C reaches the waiting main thread
            pass
        return self._planning if self._planning is not None else self.get()

    def get(self) -> Engine:
        while not self._done.wait(0.2):  # in slices: Ctrl-C reaches the waiting main thread
            pass
        if self._error is not None:
            raise self._error
        assert self._engine is not None
        return self._engine


QUICKSTART_WEIGHTS = Path(__file__).resolve().parent.parent / "models" / "tiny"  # scripts/quickstart's


def check_engine_settings(settings: Settings, weights: bool = True) -> None:
    """Raises InputError for a device or precision no engine takes and, with ``weights``, for
    ChatTTS weights that are not where the settings say: before a job is recorded or a model loads.
    The error says how to point at weights, those scripts/quickstart wrote where they exist."""
    from pipeline.engine.config import unknown_choice
    from pipeline.engine.weights import locate_model

    problem = unknown_choice(settings.device, settings.precision)
    if problem:
        raise InputError(f"{problem} (--device/--precision, or TTS_JOBS_DEVICE/TTS_JOBS_PRECISION)")
    if not weights:
        return
    try:
        locate_model(settings.model_dir, settings.hf_home)
    except ModelError as exc:
        hint = ""
        if settings.model_dir is None and (QUICKSTART_WEIGHTS / "asset").is_dir():
            hint = (f"; scripts/quickstart's synthetic weights (noise, not speech) are in {QUICKSTART_WEIGHTS}: "
                    f"export TTS_JOBS_MODEL_DIR={QUICKSTART_WEIGHTS}")
        raise InputError(f"{exc}{hint}") from None


NVIDIA_DRIVER = Path("/proc/driver/nvidia/version")  # there when the host has an NVIDIA driver loaded


def runs_on_gpu(settings: Settings) -> bool:
    """Whether the engine will run on a GPU, known without importing torch (for "auto": the host
    has an NVIDIA driver loaded)."""
    return settings.device.startswith("cuda") or (settings.device == "auto" and NVIDIA_DRIVER.exists())


def host_wait(settings: Settings) -> str:
    """How the threads that feed the GPU wait for it (EngineTuning.host_wait: the settings' or
    the engine's default)."""
    from pipeline.engine.config import EngineTuning

    return (settings.engine_tuning or EngineTuning()).host_wait


def open_engine(settings: Settings) -> Engine:
    """The synthesis engine on the settings' weights, device, precision and kernel choices
    (loaded now: seconds)."""
    from pipeline.engine import load_engine

    keep_tokenizer_threads_off()
    return load_engine(settings.engine_config())

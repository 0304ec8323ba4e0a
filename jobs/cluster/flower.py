"""Launch Flower (the Celery monitor) for this app, locked down by default.

Flower's API can shut workers down, revoke tasks and change time limits, and its pages show task
arguments and the broker URL. So this launcher:

- requires basic auth. The credentials come from Flower's own ``FLOWER_BASIC_AUTH=user:password``
  variable, which Flower reads itself, so the password never appears in ``ps``. The one exception
  is ``--local``, which binds 127.0.0.1 only;
- starts read-only (Flower's ``--read_only``): every control call answers 403 unless
  ``--allow-control`` is given;
- binds 127.0.0.1 unless told otherwise (the compose file passes ``--address 0.0.0.0`` inside its
  network);
- shows each task's arguments in the task list (``job 7``, ``batch 12``: the tasks send them as
  ``argsrepr``) and its exception, so rows of one task name tell apart and the Failed tab says
  which book failed and why. ``FLOWER_TASKS_COLUMNS`` still chooses other columns.

Flower's ``/metrics`` and ``/healthcheck`` are open by design, even with auth: don't publish the
port beyond the reverse proxy or the Prometheus network.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import TtsJobsError

log = logging.getLogger(__name__)

AUTH_ENV = "FLOWER_BASIC_AUTH"
COLUMNS_ENV = "FLOWER_TASKS_COLUMNS"
# Flower's default columns plus the arguments and the exception; the uuid (the link to a task's page) last.
TASK_COLUMNS = "name,args,state,received,runtime,worker,exception,uuid"
LOOPBACK = "127.0.0.1"
DEFAULT_PORT = 5555


class FlowerConfigError(TtsJobsError):
    """Flower would start unsafely (no credentials) or with contradictory options."""


@dataclass(frozen=True)
class FlowerOptions:
    """How to run Flower.

    Attributes:
        port: TCP port of the web UI and API.
        address: interface to bind; 127.0.0.1 by default, 0.0.0.0 inside a container.
        local: allow running without credentials, bound to 127.0.0.1 only.
        allow_control: let the UI/API shut down workers, revoke tasks... (off: read-only).
        state_file: keep the task history across Flower restarts in this file (Flower's
            ``--persistent --db``); None keeps it in memory only.
        url_prefix: serve under ``/PREFIX/`` behind a reverse proxy.
        max_tasks: how many tasks Flower keeps in memory.
    """

    port: int = DEFAULT_PORT
    address: str = LOOPBACK
    local: bool = False
    allow_control: bool = False
    state_file: Path | None = None
    url_prefix: str | None = None
    max_tasks: int = 10_000


def flower_argv(options: FlowerOptions, env: Mapping[str, str]) -> list[str]:
    """The ``celery flower`` arguments for ``options``, after checking it is safe to start.

    Raises:
        FlowerConfigError: no usable credentials outside ``--local``, or ``--local`` with a
            non-loopback address.
    """
    has_auth = _check_credentials(env.get(AUTH_ENV), required=not options.local)
    if options.local and options.address != LOOPBACK:
        raise FlowerConfigError(f"--local binds {LOOPBACK} only; drop --address {options.address}, or drop "
                                f"--local and set {AUTH_ENV}=user:password")
    argv = ["flower", f"--address={options.address}", f"--port={options.port}",
            f"--read_only={str(not options.allow_control).lower()}",
            f"--max_tasks={options.max_tasks}",
            # Workers that vanished (a host died) are dropped from the list after an hour.
            "--purge_offline_workers=3600"]
    if has_auth:  # read from a secret file (FLOWER_BASIC_AUTH_FILE) too, which Flower does not read
        argv.append(f"--basic_auth={env[AUTH_ENV]}")
    if not env.get(COLUMNS_ENV):  # Flower reads the variable itself; an option would override it
        argv.append(f"--tasks_columns={TASK_COLUMNS}")
    if options.state_file is not None:
        argv += ["--persistent=true", f"--db={options.state_file}"]
    if options.url_prefix:
        argv.append(f"--url_prefix={options.url_prefix.strip('/')}")
    _log_posture(options, has_auth)
    return argv


def _check_credentials(value: str | None, required: bool) -> bool:
    """True when ``FLOWER_BASIC_AUTH`` holds usable ``user:password`` pairs (comma-separated)."""
    if not value:
        if required:
            raise FlowerConfigError(
                f"{AUTH_ENV} is not set: Flower would let anyone who reaches its port watch and control "
                f"the workers. Set {AUTH_ENV}=user:password, or pass --local to bind {LOOPBACK} only")
        return False
    for pair in value.split(","):
        user, _, password = pair.partition(":")
        if not user.strip() or not password:
            raise FlowerConfigError(f"{AUTH_ENV} must be user:password (several: comma-separated); "
                                    f"one entry has no {'user' if not user.strip() else 'password'}")
    return True


def _log_posture(options: FlowerOptions, has_auth: bool) -> None:
    where = f"http://{options.address}:{options.port}/{(options.url_prefix or '').strip('/')}"
    auth = "basic auth" if has_auth else "NO password (local mode: reachable from this machine only)"
    control = "control allowed" if options.allow_control else "read-only"
    level = logging.INFO if has_auth else logging.WARNING  # running without a password is worth a warning
    log.log(level, "Flower on %s, %s, %s", where, auth, control)


def run_flower(options: FlowerOptions, env: Mapping[str, str]) -> int:
    """Run Flower in this process until it is stopped (SIGTERM/SIGINT). Returns its exit code.

    Flower reads ``FLOWER_*`` variables itself (``FLOWER_BASIC_AUTH`` among them); the options
    given here are passed after them and win.
    """
    argv = flower_argv(options, env)
    from jobs.cluster.celery_app import app  # the same broker and transport settings as the workers

    return app.start(argv) or 0

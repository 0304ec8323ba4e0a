"""docker-compose.yml, the Dockerfile and the lock files: valid, safe by default, healthy.

Compose validates the file offline (`docker-compose config`); the assertions then read the file as
compose resolves it (anchors merged, variables filled in), because that is what would run.
No Docker engine is needed: the health checks' commands run here, against a real worker and a
real Flower.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from importlib.metadata import requires
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import env_for
from tests.e2e_helpers import TTS_JOBS, read_log, terminate
from tests.test_flower import free_port, popen_flower, wait_until

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
SECRETS = {"postgres_password": "pg-secret-1", "redis_password": "redis-secret-2",
           "flower_basic_auth": "ops:flower-secret-3"}
SECRETS_DIR = "/run/tts-jobs-test-secrets"  # where compose is told the secret files are
ENV = {"TTS_JOBS_SECRETS": SECRETS_DIR}
WORKERS = ("cpu-worker", "gpu-workers")
LONG_RUNNING = ("redis", "postgres", "flower", *WORKERS)


def compose(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.fail("docker-compose is missing: run scripts/setup (it installs the Debian docker-compose "
                    "package, which validates compose files offline)")
    # A minimal environment: the developer's own REDIS_PASSWORD etc. must not leak into the test.
    base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(Path.home())}
    return subprocess.run([binary, "-f", str(COMPOSE_FILE), *args], env={**base, **env}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def services() -> dict[str, Any]:
    return _config()["services"]


def _config(env: dict[str, str] | None = None) -> dict[str, Any]:
    result = compose(["config"], env or ENV)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_compose_file_is_valid() -> None:
    result = compose(["config", "-q"], ENV)
    assert result.returncode == 0, result.stderr


def test_passwords_are_secret_files_never_in_environment_or_command_lines(services: dict[str, Any]) -> None:
    secrets = _config()["secrets"]
    assert {name: Path(entry["file"]) for name, entry in secrets.items()} == {
        name: Path(SECRETS_DIR) / name for name in SECRETS}
    rendered = yaml.safe_dump(services)
    assert "PASSWORD:" not in rendered and "FLOWER_BASIC_AUTH:" not in rendered
    assert "requirepass" not in " ".join(services["redis"]["command"][:-1])  # only in its stdin
    assert not re.search(r"://[^/@]*:[^/@]*@", rendered), "a password in a URL"
    mounted = {name: {entry["source"] for entry in service.get("secrets", [])} for name, service in services.items()}
    assert mounted["postgres"] == {"postgres_password"}
    assert mounted["redis"] == {"redis_password"}
    assert mounted["flower"] == {"redis_password", "flower_basic_auth"}
    for name in ("migrate", *WORKERS, "bulk"):
        assert mounted[name] == {"postgres_password", "redis_password"}, name
        env = services[name]["environment"]
        assert env["TTS_JOBS_DATABASE_PASSWORD_FILE"] == "/run/secrets/postgres_password"
        assert env["TTS_JOBS_DATABASE_URL"] == "postgresql://tts@postgres:5432/tts_jobs"
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD_FILE"] == "/run/secrets/postgres_password"


def test_redis_persists_the_queue_never_evicts_and_reads_its_password_from_the_secret(
        tmp_path: Path, services: dict[str, Any]) -> None:
    """The service's own command runs here against the real redis-server, on a spare port."""
    shell, flag, script = services["redis"]["command"]
    assert (shell, flag) == ("sh", "-c") and ("redis", "/data") in _volumes(services["redis"])
    secret = tmp_path / "redis_password"
    secret.write_text(SECRETS["redis_password"] + "\n")
    port = free_port()
    script = (script.replace("$$", "$").replace("/run/secrets/redis_password", str(secret))
              .replace("noeviction", f"noeviction --port {port} --dir {tmp_path}"))
    with open(tmp_path / "redis.log", "w") as log:
        redis = subprocess.Popen(["sh", "-c", script], stdout=log, stderr=subprocess.STDOUT)
    try:
        def cli(*args: str, password: str | None = None) -> str:
            env = {"PATH": os.environ["PATH"], **({"REDISCLI_AUTH": password} if password else {})}
            return subprocess.run(["redis-cli", "-p", str(port), *args], env=env, capture_output=True,
                                  text=True, timeout=10).stdout.strip()
        wait_until(lambda: cli("ping") != "", 30, f"redis to start ({read_log(tmp_path / 'redis.log')})")
        assert "NOAUTH" in cli("ping")
        assert cli("ping", password=SECRETS["redis_password"]) == "PONG"
        assert cli("config", "get", "maxmemory-policy", password=SECRETS["redis_password"]).split() == [
            "maxmemory-policy", "noeviction"]
        assert cli("config", "get", "appendonly", password=SECRETS["redis_password"]).split()[-1] == "yes"
        with open(f"/proc/{redis.pid}/cmdline") as cmdline:  # the shell became redis-server, no password
            assert SECRETS["redis_password"] not in cmdline.read()
        [kind, check] = services["redis"]["healthcheck"]["test"]
        check = check.replace("$$", "$").replace("/run/secrets/redis_password", str(secret))
        check = check.replace("redis-cli ping", f"redis-cli -p {port} ping")
        assert kind == "CMD-SHELL" and _passes(check, {"PATH": os.environ["PATH"]})
        secret.write_text("wrong")
        assert not _passes(check, {"PATH": os.environ["PATH"]})
    finally:
        redis.terminate()
        assert redis.wait(timeout=30) == 0, "SIGTERM reaches redis-server (no shell in between)"


def test_redis_and_postgres_are_not_published_and_flower_only_on_loopback(services: dict[str, Any]) -> None:
    assert "ports" not in services["redis"]
    assert "ports" not in services["postgres"]
    for name, service in services.items():
        for port in service.get("ports", []):
            published = port if isinstance(port, str) else f"{port.get('host_ip', '')}:{port['published']}"
            assert published.startswith("127.0.0.1:"), (name, port)


def test_every_service_talks_to_redis_with_the_password_from_its_secret(services: dict[str, Any]) -> None:
    for name in ("migrate", "flower", *WORKERS, "bulk"):
        env = services[name]["environment"]
        assert env["TTS_JOBS_BROKER_URL"] == "redis://redis:6379/0", name
        assert env["TTS_JOBS_BROKER_PASSWORD_FILE"] == "/run/secrets/redis_password", name


def test_every_service_rotates_its_logs(services: dict[str, Any]) -> None:
    for name, service in services.items():
        logging = service["logging"]
        assert logging["driver"] == "json-file" and logging["options"]["max-size"], name
        assert int(logging["options"]["max-file"]) >= 2, name


def test_the_cpu_worker_may_finish_its_step_before_it_is_killed(services: dict[str, Any]) -> None:
    cpu = services["cpu-worker"]
    assert cpu["stop_grace_period"] == "10m" and cpu["init"] is True


def test_postgres_keeps_its_data_in_a_volume(services: dict[str, Any]) -> None:
    assert ("postgres", "/var/lib/postgresql/data") in _volumes(services["postgres"])


def test_workers_start_only_after_the_migration_succeeded(services: dict[str, Any]) -> None:
    assert services["migrate"]["command"] == ["tts-jobs", "db", "upgrade"]
    assert services["migrate"]["restart"] == "no"
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in (*WORKERS, "bulk"):
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name


def test_flower_requires_basic_auth_and_is_read_only(services: dict[str, Any]) -> None:
    flower = services["flower"]
    assert flower["environment"]["FLOWER_BASIC_AUTH_FILE"] == "/run/secrets/flower_basic_auth"
    assert flower["command"][:2] == ["tts-jobs", "flower"]
    assert "--allow-control" not in flower["command"] and "--local" not in flower["command"]


def test_one_cpu_worker_and_one_service_running_a_worker_per_gpu(services: dict[str, Any]) -> None:
    assert _option(services["cpu-worker"]["command"], "--queues") == "cpu"
    gpu = services["gpu-workers"]
    assert gpu["command"] == ["tts-jobs", "worker", "--gpus", "all"]
    [device] = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert device["count"] == "all" and "gpu" in device["capabilities"]
    assert "utility" in gpu["environment"]["NVIDIA_DRIVER_CAPABILITIES"]  # nvidia-smi counts the cards
    assert gpu["init"] is True and gpu["stop_grace_period"] == "5m"
    assert "deploy" not in services["cpu-worker"]
    assert not [name for name in services if re.fullmatch(r"gpu-worker-\d+", name)]


def test_the_gpu_workers_can_serve_chosen_cards() -> None:
    result = compose(["config"], {**ENV, "TTS_JOBS_GPUS": "0,2"})
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["services"]["gpu-workers"]["command"][-1] == "0,2"


def test_every_long_running_service_has_a_health_check(services: dict[str, Any]) -> None:
    for name in LONG_RUNNING:
        check = services[name]["healthcheck"]
        assert check["test"][0] in ("CMD", "CMD-SHELL") and check["interval"] and check["retries"], name
    assert services["gpu-workers"]["healthcheck"] == services["cpu-worker"]["healthcheck"]


@pytest.mark.slow
def test_the_workers_health_check_follows_a_real_worker(
        tmp_path: Path, services: dict[str, Any], settings_factory, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    ready_check, alive_check = _shell_check(services["cpu-worker"]), _liveness_check()
    # Not niced as a CPU worker is by default: on a loaded machine a niced worker's start waits
    # minutes for the cores, and the check follows its heartbeats, not its priority.
    env = {**env_for(settings_factory()), "TMPDIR": str(tmp_path), "TTS_JOBS_CPU_WORKER_NICE": "0"}
    alive, ready = tmp_path / "tts-jobs-alive", tmp_path / "tts-jobs-ready"
    host = socket.gethostname()
    # a worker of an earlier container run, and one of another host on a shared /tmp: not alive
    alive.mkdir()
    (alive / "cpu@health-test").write_text(f"{_dead_pid()} {host}\n")
    (alive / "gpu0@other-host").write_text(f"{os.getpid()} other-host\n")
    assert _passes(alive_check, env) is False and _passes(ready_check, env) is False
    (alive / "gpu0@other-host").unlink()
    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as log:
        worker = subprocess.Popen([*TTS_JOBS, "worker", "--cpu", "--name", "cpu@health-test"], env=env,
                                  stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: _passes(ready_check, env), 120, f"the check to pass (log: {read_log(log_path)[-2000:]})")
        assert _passes(alive_check, env)
        [beat] = list(alive.iterdir())
        assert beat.name == "cpu@health-test" and beat.read_text().split() == [str(worker.pid), host]
        [pool_pid, pool_host] = (ready / "cpu@health-test").read_text().split()
        assert pool_host == host and int(pool_pid) != worker.pid  # a pool process, loaded
        first = beat.stat().st_mtime
        wait_until(lambda: beat.stat().st_mtime > first, 10, "the next heartbeat to rewrite the file")
    finally:
        terminate(worker)
    # a worker gone is at once neither alive nor ready (no minute's wait for a stale file)
    assert _passes(alive_check, env) is False and _passes(ready_check, env) is False
    # alive but not ready (a GPU worker still loading its model): liveness passes, readiness not
    (alive / "gpu0@health-test").write_text(f"{os.getpid()} {host}\n")
    assert _passes(alive_check, env) is True and _passes(ready_check, env) is False
    ready.mkdir(exist_ok=True)
    (ready / "gpu0@health-test").write_text(f"{os.getpid()} {host}\n")
    assert _passes(ready_check, env) is True
    (alive / "gpu1@health-test").write_text(f"{os.getpid()} {host}\n")  # another card's worker, not ready...
    assert _passes(ready_check, env) is False  # ...makes the service not ready
    (ready / "gpu1@health-test").write_text(f"{os.getpid()} {host}\n")
    os.utime(alive / "gpu1@health-test", (time.time() - 61, time.time() - 61))  # a minute without a heartbeat
    assert _passes(alive_check, env) is False and _passes(ready_check, env) is False


def test_only_ready_workers_let_the_bulk_run_start(services: dict[str, Any]) -> None:
    for name in WORKERS:
        assert services["bulk"]["depends_on"][name]["condition"] == "service_healthy"


def _liveness_check() -> str:
    """The liveness-only check the compose file documents (an x- extension, not rendered)."""
    return yaml.safe_load(COMPOSE_FILE.read_text())["x-worker-liveness"].replace("$$", "$")


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


@pytest.mark.slow
def test_the_flower_health_check_needs_no_password(tmp_path: Path, services: dict[str, Any], settings_factory,
                                                    redis_url: str) -> None:  # type: ignore[no-untyped-def]
    [kind, program, *args] = services["flower"]["healthcheck"]["test"]
    assert kind == "CMD"
    port = free_port()
    command = [sys.executable if program == "python" else program,
               *[arg.replace("127.0.0.1:5555", f"127.0.0.1:{port}") for arg in args]]
    secret = tmp_path / "flower_basic_auth"
    secret.write_text("ops:s3cret\n")
    env = {**env_for(settings_factory()), "FLOWER_BASIC_AUTH_FILE": str(secret)}
    env.pop("FLOWER_BASIC_AUTH", None)
    assert subprocess.run(command, check=False, capture_output=True, timeout=30).returncode != 0, "no Flower yet"
    flower = popen_flower(["--port", str(port)], env, tmp_path / "flower.log")
    try:
        wait_until(lambda: requests.get(f"http://127.0.0.1:{port}/", timeout=5).status_code == 401, 60,
                   "Flower to start, behind its password")
        assert requests.get(f"http://127.0.0.1:{port}/", auth=("ops", "s3cret"), timeout=5).status_code == 200
        result = subprocess.run(command, check=False, capture_output=True, text=True, timeout=30)
    finally:
        terminate(flower)
    assert result.returncode == 0, result.stderr


def _shell_check(service: dict[str, Any]) -> str:
    """A CMD-SHELL health check's command as the container's shell gets it ($$ is compose's $)."""
    kind, command = service["healthcheck"]["test"]
    assert kind == "CMD-SHELL"
    return command.replace("$$", "$")


def _passes(command: str, env: dict[str, str]) -> bool:
    return subprocess.run(["sh", "-c", command], check=False, env=env, capture_output=True,
                          timeout=30).returncode == 0


def test_all_tts_jobs_services_share_one_image_and_the_data_volume(services: dict[str, Any]) -> None:
    names = ("migrate", "flower", *WORKERS, "bulk")
    assert len({services[n]["image"] for n in names}) == 1
    for name in (*WORKERS, "bulk"):
        data_dir = services[name]["environment"]["TTS_JOBS_DATA_DIR"]
        assert ("data", data_dir) in _volumes(services[name]), name
    # The audiobooks folder is the same path in the bulk run (which names it) and the assembling worker.
    assert "/audiobooks" in _option(services["bulk"]["command"], "--out")
    assert "/audiobooks" in {target for _, target in _volumes(services["cpu-worker"])}


def test_the_nightly_bulk_run_starts_only_on_demand(services: dict[str, Any]) -> None:
    bulk = services["bulk"]
    assert bulk["profiles"] == ["bulk"]
    assert bulk["command"][:2] == ["tts-jobs", "bulk"] and "--wait" in bulk["command"]


def test_dockerfile_builds_the_shared_image_with_ffmpeg_and_the_locked_dependencies() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert [line for line in dockerfile.splitlines() if line.startswith("FROM ")] == ["FROM python:3.11-slim"]
    assert "apt-get install -y --no-install-recommends ffmpeg" in dockerfile
    assert "COPY requirements.lock ./\nRUN pip install --require-hashes -r requirements.lock\n" in dockerfile
    assert "pip install --no-deps ." in dockerfile and "\nUSER tts" in dockerfile
    # the GPU's INT8 path (torchao), installed hash-checked at the version pyproject's gpu extra names
    assert "COPY requirements-gpu.lock ./\nRUN pip install --require-hashes --no-deps -r requirements-gpu.lock\n" \
        in dockerfile
    [gpu_extra] = [r for r in map(Requirement, requires("tts-jobs") or []) if r.marker and r.marker.evaluate(
        {"extra": "gpu"}) and not r.marker.evaluate({"extra": ""})]
    assert _locked(ROOT / "requirements-gpu.lock") == {canonicalize_name(gpu_extra.name): str(
        gpu_extra.specifier).removeprefix("==")}
    # No digest is made up: the tag is pinned, and the file says how to add the digest.
    assert "docker buildx imagetools inspect python:3.11-slim" in dockerfile
    assert not re.search(r"@sha256:[0-9a-f]{64}", dockerfile)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".git", "models", "*.safetensors", ".env", "secrets"} <= set(ignored)


def test_the_locks_pin_every_dependency_with_hashes_and_torch_as_pyproject_does() -> None:
    runtime, test = _locked(ROOT / "requirements.lock"), _locked(ROOT / "requirements-test.lock")
    assert not set(runtime) & set(test), "the test lock holds only what the runtime lock does not"
    # What pyproject.toml asks for, as installed (scripts/setup installs again when it changes); the
    # gpu extra (torchao) is not in the tested environment, so not in the locks.
    wanted = requires("tts-jobs")
    assert wanted, "tts-jobs is not installed: run scripts/setup"
    for requirement in map(Requirement, wanted):
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": "test"}):
            continue
        lock = {**runtime, **test} if requirement.marker is not None else runtime
        name = canonicalize_name(requirement.name)
        assert name in lock, f"{name} is not locked"
        assert requirement.specifier.contains(lock[name]), (requirement, lock[name])
    assert runtime["torch"] == runtime["torchaudio"] == "2.11.0"


def _locked(path: Path) -> dict[str, str]:
    """name -> pinned version of each requirement of a lock file; each must carry a hash."""
    pins = {}
    for entry in re.split(r"\n(?=[A-Za-z])", path.read_text()):
        if entry.startswith("#"):
            continue
        requirement = Requirement(entry.split(" \\", 1)[0].strip())
        [specifier] = requirement.specifier
        assert specifier.operator == "==" and "--hash=sha256:" in entry, entry[:200]
        pins[canonicalize_name(requirement.name)] = specifier.version
    return pins


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def _volumes(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of each mount, from compose's short ("src:dst:mode") or long syntax."""
    mounts = []
    for volume in service.get("volumes", []):
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
            mounts.append((source, target))
        else:
            mounts.append((volume["source"], volume["target"]))
    return mounts

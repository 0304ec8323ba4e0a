"""docker-compose.yml and the Dockerfile: valid, and safe by default.

Compose validates the file offline (`docker-compose config`); the assertions then read the file as
compose resolves it (anchors merged, variables filled in), because that is what would run.
No Docker engine is needed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
SECRETS = {"POSTGRES_PASSWORD": "pg-secret-1", "REDIS_PASSWORD": "redis-secret-2",
           "FLOWER_BASIC_AUTH": "ops:flower-secret-3"}
WORKERS = ("cpu-worker", "gpu-worker-0")


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
    result = compose(["config"], SECRETS)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)["services"]


def test_compose_file_is_valid() -> None:
    result = compose(["config", "-q"], SECRETS)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("missing", sorted(SECRETS))
def test_compose_refuses_to_start_without_each_secret(missing: str) -> None:
    env = {k: v for k, v in SECRETS.items() if k != missing}
    result = compose(["config", "-q"], env)
    assert result.returncode != 0
    assert missing in result.stderr


def test_redis_persists_the_queue_never_evicts_and_needs_the_password(services: dict[str, Any]) -> None:
    command = services["redis"]["command"]
    assert _option(command, "--appendonly") == "yes"
    assert _option(command, "--maxmemory-policy") == "noeviction"
    assert _option(command, "--requirepass") == SECRETS["REDIS_PASSWORD"]
    assert ("redis", "/data") in _volumes(services["redis"])


def test_redis_and_postgres_are_not_published_and_flower_only_on_loopback(services: dict[str, Any]) -> None:
    assert "ports" not in services["redis"]
    assert "ports" not in services["postgres"]
    for name, service in services.items():
        for port in service.get("ports", []):
            published = port if isinstance(port, str) else f"{port.get('host_ip', '')}:{port['published']}"
            assert published.startswith("127.0.0.1:"), (name, port)


def test_every_service_talks_to_redis_with_the_password(services: dict[str, Any]) -> None:
    expected = f"redis://:{SECRETS['REDIS_PASSWORD']}@redis:6379/0"
    for name in ("migrate", "flower", *WORKERS, "bulk"):
        assert services[name]["environment"]["TTS_JOBS_BROKER_URL"] == expected, name


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
    assert flower["environment"]["FLOWER_BASIC_AUTH"] == SECRETS["FLOWER_BASIC_AUTH"]
    assert flower["command"][:2] == ["tts-jobs", "flower"]
    assert "--allow-control" not in flower["command"] and "--local" not in flower["command"]


def test_one_cpu_worker_and_one_gpu_worker_pinned_to_gpu_0(services: dict[str, Any]) -> None:
    assert _option(services["cpu-worker"]["command"], "--queues") == "cpu"
    gpu = services["gpu-worker-0"]
    assert _option(gpu["command"], "--queues") == "synth"
    assert _option(gpu["command"], "--concurrency") == "1"
    [device] = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert device["device_ids"] == ["0"] and "gpu" in device["capabilities"]
    assert "deploy" not in services["cpu-worker"]


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


def test_dockerfile_builds_the_shared_image_with_ffmpeg() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert [line for line in dockerfile.splitlines() if line.startswith("FROM ")] == ["FROM python:3.11-slim"]
    assert "apt-get install -y --no-install-recommends ffmpeg" in dockerfile
    assert "pip install --no-deps ." in dockerfile and "\nUSER tts" in dockerfile
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".git", "models", "*.safetensors", ".env"} <= set(ignored)


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

"""redis-server and ffmpeg for the whole-run measurements on a bare lent machine: from the kit
folder (docs/gpu-kit.md) when it has them, else from PATH."""

from __future__ import annotations

import io
import lzma
import re
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from jobs.settings import child_environment, prepended
from pipeline.bench.run_log import RunFailed, progress


@dataclass(frozen=True)
class Tools:
    """Where redis-server and ffmpeg come from, and the environment they need."""

    redis_server: Path
    redis_env: dict[str, str]
    path_prefix: str  # prepended to PATH for every tts-jobs process ("" when ffmpeg is on PATH)


def prepare_tools(kit: Path, scratch: Path) -> Tools:
    """redis-server and ffmpeg from the kit when it has them, else from PATH; each is run once here."""
    if (kit / "debs").is_dir():
        redis_server, redis_env = kit_redis(kit / "debs", scratch / "redis")
    else:
        redis_server, redis_env = which_or_fail("redis-server"), {}
    ffmpeg_dir = kit_ffmpeg(kit / "bin", scratch / "bin")
    tools = Tools(redis_server=redis_server, redis_env=redis_env, path_prefix=str(ffmpeg_dir or ""))
    search_path = prepended("PATH", tools.path_prefix)
    ffmpeg = shutil.which("ffmpeg", path=search_path)
    if ffmpeg is None:
        raise RunFailed("no ffmpeg: put one on PATH or bin/ffmpeg.xz into the kit")
    progress(f"redis-server: {redis_server} ({first_line([str(redis_server), '--version'], redis_env)})")
    progress(f"ffmpeg: {ffmpeg} ({first_line([ffmpeg, '-version'], {})})")
    return tools


def which_or_fail(name: str) -> Path:
    found = shutil.which(name)
    if found is None:
        raise RunFailed(f"no {name}: put one on PATH or bring a kit (--kit)")
    return Path(found)


def first_line(command: list[str], extra_env: dict[str, str]) -> str:
    out = subprocess.run(command, capture_output=True, text=True, env=child_environment(**extra_env),
                         timeout=30, check=False)
    if out.returncode != 0:
        raise RunFailed(f"{command[0]} does not run here: {(out.stderr or out.stdout).strip()[-500:]}")
    return (out.stdout.strip().splitlines() or [""])[0]


# Inside the Debian packages: the redis binary (redis-server is redis-check-rdb under another name;
# redis picks its role from argv[0]) and the shared libraries it loads.
_REDIS_MEMBER = re.compile(
    r"(?:\./)?(usr/bin/redis-check-rdb|(?:usr/)?lib/x86_64-linux-gnu/lib[^/]+\.so[.0-9]*)")


def kit_redis(debs: Path, target: Path) -> tuple[Path, dict[str, str]]:
    """Unpack redis-server and its libraries from the kit's .deb files (no dpkg needed)."""
    (target / "lib").mkdir(parents=True, exist_ok=True)
    server = target / "redis-server"
    for deb in sorted(debs.glob("*.deb")):
        with tarfile.open(fileobj=io.BytesIO(deb_data_tar(deb))) as tar:
            for member in tar.getmembers():
                match = _REDIS_MEMBER.fullmatch(member.name)
                if match is None:
                    continue
                name = Path(match.group(1)).name
                dest = server if name == "redis-check-rdb" else target / "lib" / name
                if member.issym() and "/" not in member.linkname:
                    dest.unlink(missing_ok=True)
                    dest.symlink_to(member.linkname)
                elif member.isfile():
                    with tar.extractfile(member) as content:  # type: ignore[union-attr]
                        dest.write_bytes(content.read())
                    dest.chmod(0o755)
    if not server.exists():
        raise RunFailed(f"no redis-tools package in {debs}")
    return server, {"LD_LIBRARY_PATH": prepended("LD_LIBRARY_PATH", str(target / "lib"))}


def deb_data_tar(deb: Path) -> bytes:
    """The data.tar.* member of a .deb (an `ar` archive: 8-byte magic, then 60-byte member headers)."""
    blob = deb.read_bytes()
    if not blob.startswith(b"!<arch>\n"):
        raise RunFailed(f"{deb} is not a Debian package")
    position = 8
    while position + 60 <= len(blob):
        header = blob[position:position + 60]
        name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58])
        if name.startswith("data.tar"):
            return blob[position + 60:position + 60 + size]
        position += 60 + size + size % 2
    raise RunFailed(f"{deb} has no data.tar member")


def kit_ffmpeg(kit_bin: Path, target: Path) -> Path | None:
    """A folder holding the kit's ffmpeg (bin/ffmpeg as is, or bin/ffmpeg.xz unpacked), or None."""
    if (kit_bin / "ffmpeg").is_file():
        return kit_bin
    packed = kit_bin / "ffmpeg.xz"
    if not packed.is_file():
        return None
    target.mkdir(parents=True, exist_ok=True)
    with lzma.open(packed) as source, open(target / "ffmpeg", "wb") as dest:
        shutil.copyfileobj(source, dest, 1 << 20)
    (target / "ffmpeg").chmod(0o755)
    return target

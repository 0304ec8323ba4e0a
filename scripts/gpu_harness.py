"""The parts of the GPU measurement scripts that are not the measurement: a progress line, redis-server
and ffmpeg from the kit (docs/gpu-kit.md), worker processes started and stopped by process group,
and the books they speak (Markdown or EPUB 3 of the benchmark's sentences)."""

from __future__ import annotations

import datetime as dt
import io
import lzma
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline import lengths  # noqa: E402
from pipeline.bench.protocol import make_workload  # noqa: E402
from pipeline.types import GPT_STEPS_PER_SECOND  # noqa: E402

TTS_JOBS = [sys.executable, "-m", "jobs.cli"]
STARTED = time.monotonic()


def progress(message: str) -> None:
    """A timestamped line, flushed at once: a run killed from outside still shows where it was."""
    now = dt.datetime.now().strftime("%H:%M:%S")
    print(f"[{now} +{time.monotonic() - STARTED:6.1f}s] {message}", flush=True)

class RunFailed(Exception):
    """The measurement cannot go on; the message says why."""

# ------------------------------------------------------------------------------------ the books


def write_books(folder: Path, sentences_per_book: int, chapters: int,
                shelf: Sequence[float] = ()) -> tuple[list[Path], float]:
    """Two Markdown books of the same size, mixed Chinese/English, or EPUB 3 books of the ``shelf``'s
    hours. Returns them and their audio cap (s)."""
    folder.mkdir(parents=True, exist_ok=True)
    if shelf:
        books = [write_epub_book(folder / f"shelf_{number + 1}.epub", f"Shelf Book {number + 1}",
                                 f"Author {number + 1}", hours, chapters, seed=2000 + number)
                 for number, hours in enumerate(shelf)]
        return [path for path, _ in books], sum(cap for _, cap in books)
    books, cap_seconds = [], 0.0
    for number, title in enumerate(("Scaling Book A", "Scaling Book B")):
        sentences = make_workload(sentences_per_book, seed=1000 + number)
        path = folder / f"book_{'ab'[number]}.md"
        path.write_text(book_markdown(title, sentences, chapters), encoding="utf-8")
        books.append(path)
        cap_seconds += audio_cap_seconds(sentences)
    return books, cap_seconds


SECONDS_PER_SENTENCE = 4.8  # what the workload's sentences come to on synthetic weights


def write_epub_book(path: Path, title: str, author: str, hours: float, chapters: int,
                    seed: int = 42) -> tuple[Path, float]:
    """An EPUB 3 of about ``hours`` of audio: the workload's sentences, six to a paragraph, in
    ``chapters`` chapters. Returns it and its audio cap (s)."""
    from tests.books import write_epub

    sentences = make_workload(max(chapters, round(hours * 3600 / SECONDS_PER_SENTENCE)), seed=seed)
    per_chapter = -(-len(sentences) // chapters)
    parts = []
    for number in range(chapters):
        body = sentences[number * per_chapter:(number + 1) * per_chapter]
        paragraphs = [" ".join(body[i:i + 6]) for i in range(0, len(body), 6)]
        parts.append((f"Chapter {number + 1}", paragraphs))
    return write_epub(path, title, parts, author=author), audio_cap_seconds(sentences)


def audio_cap_seconds(sentences: Sequence[str]) -> float:
    return sum(lengths.max_new_tokens(s) for s in sentences) / GPT_STEPS_PER_SECOND


def book_markdown(title: str, sentences: list[str], chapters: int, per_paragraph: int = 6) -> str:
    per_chapter = -(-len(sentences) // chapters)
    parts = [f"# {title}\n"]
    for chapter in range(chapters):
        body = sentences[chapter * per_chapter:(chapter + 1) * per_chapter]
        parts.append(f"\n## Chapter {chapter + 1}\n")
        for start in range(0, len(body), per_paragraph):
            parts.append("\n" + " ".join(body[start:start + per_paragraph]) + "\n")
    return "".join(parts)

# ------------------------------------------------------------------------------------ tools


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
    search_path = os.pathsep.join(filter(None, [tools.path_prefix, os.environ.get("PATH", "")]))
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
    out = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **extra_env}, timeout=30)
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
    return server, {"LD_LIBRARY_PATH": os.pathsep.join(
        filter(None, [str(target / "lib"), os.environ.get("LD_LIBRARY_PATH", "")]))}


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


# ------------------------------------------------------------------------------------ processes


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def redis_running(tools: Tools, folder: Path) -> Iterator[int]:
    """A private redis-server on a free port (no persistence); stopped on exit. Yields the port."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    command = [str(tools.redis_server), "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", str(folder), "--logfile", str(folder / "redis.log")]
    server = subprocess.Popen(command, env={**os.environ, **tools.redis_env}, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        wait_for_redis(port, server)
        progress(f"redis-server pid {server.pid} on 127.0.0.1:{port}")
        yield port
    finally:
        stop_process_groups([server])


def wait_for_redis(port: int, server: subprocess.Popen[bytes], timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RunFailed(f"redis-server exited with {server.returncode} at start-up")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
                connection.sendall(b"PING\r\n")
                if connection.recv(64).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RunFailed(f"redis-server did not answer on port {port} within {timeout:.0f} s")


@dataclass
class WorkerProcess:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def is_ready(self) -> bool:
        """Celery logs 'NAME ready.' once connected; the model loads in the pool child after that,
        so a synthesis worker is ready only once it has also registered (see wait_until_ready)."""
        return f"{self.name} ready." in self.log_text()


def start_worker(name: str, args: list[str], env: dict[str, str], log_path: Path) -> WorkerProcess:
    """`tts-jobs ARGS` in its own process group (so that stopping it stops its pool's children)."""
    with open(log_path, "wb") as log_file:  # the child keeps its own copy of the descriptor
        process = subprocess.Popen(TTS_JOBS + args + ["--loglevel", "INFO"], env=env, cwd=REPO,
                                   stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
    progress(f"started {name}: pid {process.pid}: tts-jobs {' '.join(args)}")
    return WorkerProcess(name=name, process=process, log_path=log_path)


def stop_process_groups(processes: list[subprocess.Popen[bytes]], grace: float = 15) -> None:
    """SIGTERM each process's group (Celery: warm shutdown), SIGKILL what is left after ``grace`` s."""
    signal_groups(processes, signal.SIGTERM)
    deadline = time.monotonic() + grace
    for process in processes:
        try:
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            progress(f"pid {process.pid} still running after {grace:.0f} s; killing its process group")
    signal_groups(processes, signal.SIGKILL)  # also any pool child that outlived its parent
    for process in processes:
        process.wait(timeout=10)


def signal_groups(processes: list[subprocess.Popen[bytes]], sig: signal.Signals) -> None:
    for process in processes:
        try:
            os.killpg(process.pid, sig)  # each was started in its own session: group id = its pid
        except ProcessLookupError:
            pass


def parent_pid(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None

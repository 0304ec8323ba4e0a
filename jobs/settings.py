"""Every environment variable tts-jobs reads, declared and read here, once, at the edge.

| variable | default | meaning |
|---|---|---|
| TTS_JOBS_DATA_DIR | the per-user data dir | SQLite file, stored books, sentence audio, outputs |
| TTS_JOBS_DATABASE_URL | sqlite:///$DATA_DIR/tts-jobs.db | or postgresql://user@host/db |
| TTS_JOBS_BROKER_URL | redis://127.0.0.1:6379/0 | Celery broker (Redis) |
| TTS_JOBS_MODEL_DIR | (Hugging Face cache) | ChatTTS weights in upstream layout |
| TTS_JOBS_DEVICE | auto | auto, cpu, cuda, cuda:N |
| TTS_JOBS_PRECISION | auto | auto, fp32, fp16, bf16, int8 |
| TTS_JOBS_MEMORY_GIB | (the card) | the most GPU memory a synthesis process may use, a hard cap (as a smaller card would have); batches and decode slots are sized from it |
| TTS_JOBS_MEMORY_FRACTION | 0.85 | share of GPU memory (or of the cap) the planner may plan for |
| TTS_JOBS_WAVES | 8 | stretches of whole chapters a book is planned in and assembled ahead by (its first chapters finished while the rest is spoken; for measuring the tail after the last sentence against the planner's sort) |
| TTS_JOBS_MAX_BATCH | 1024 (GPU) / 16 (CPU) | most sentences in one batch (the pool its decode slots draw from; the planner's memory cap may allow fewer) |
| TTS_JOBS_SLOTS | (the batch) | most sentences a GPU worker decodes at once; the rest of the batch waits for a free slot |
| TTS_JOBS_STREAM_SECONDS | 60 | how long a synthesis worker goes on claiming the next batch into the decode slots of the one it runs (jobs/batches/stream.py); 0 runs every batch on its own |
| TTS_JOBS_LEASE_SECONDS | 120 | a running batch whose worker is silent this long is taken over; it sets the sweeps' pace too: every worker sweeps every lease / 4 (5 s at least) and sends again a message missing for lease / 4 (30 s at most) |
| TTS_JOBS_VISIBILITY_TIMEOUT | 21600 | Redis redelivery of unacknowledged messages (longer than any batch) |
| TTS_JOBS_MAX_ATTEMPTS | 3 | attempts per batch before its sentences fail |
| TTS_JOBS_CPU_WORKER_NICE | 10 | niceness of a worker serving only the CPU queue (ingest, planning, assembly), so that it never starves the host threads that feed the GPUs; 0 leaves it alone |
| TTS_JOBS_MEASURE_HELPERS | one per 4 cores (8+ cores), else 0 | helper processes that measure a synthesis worker's sentences ahead of assembly |
| TTS_JOBS_LOG_LEVEL | INFO | log level of the command line and of the workers' own lines |
| TTS_JOBS_KV_CACHE | auto | the decode slots' keys and values: auto (int8 on the GPU's fp16/bf16 path), int8, model |
| TTS_JOBS_DECODE_ATTENTION | triton | decode-step attention on CUDA in half precision: triton or sdpa (EngineTuning, for measuring) |
| TTS_JOBS_FUSED_LAYERS | 1 | 0: the PyTorch ops instead of the SiLU x up (its input's RMSNorm inside) and final add + RMSNorm kernels (for measuring) |
| TTS_JOBS_CUDA_GRAPHS | 1 | 0: decode steps and Decoder+Vocos chunks run eagerly, not replayed from CUDA graphs (for measuring) |
| TTS_JOBS_PREFILL_GRAPHS | 1 | 0: admissions' prefills run eagerly, not replayed from CUDA graphs (for measuring) |
| TTS_JOBS_DECODE_CUDNN | 0 | 1: cuDNN for the Decoder and Vocos convolutions (slower: it plans per shape) |
| TTS_JOBS_ATTENTION_BLOCK | 32 | positions per loop iteration of the Triton attention kernel (for its sweep) |
| TTS_JOBS_ATTENTION_WARPS | 1 | warps per program of the Triton attention kernel (for its sweep) |
| TTS_JOBS_ATTENTION_STAGES | 2 | blocks of positions in flight per program of that kernel and of the word kernel: 2+ pipelines their loads; 1, a plain loop |
| TTS_JOBS_CUDA_WAIT | block | how the threads that feed a GPU wait for it: block (asleep) or spin (a core spun; for measuring) |
| TTS_JOBS_ATTENTION_KERNEL | words | the Triton attention kernel of a decode step: words (the int8 cache read as 32-bit words), single or split (for measuring) |
| TTS_JOBS_ATTENTION_ROPE | 1 | 0: a step's RoPE and cache write in a kernel of their own before the word kernel, not inside it (word_attention.py; same codes; steps 2.61 vs 2.70 ms on an H100) |
| TTS_JOBS_ATTENTION_ORDER | 0 | 1: the word kernel's programs start longest slot first, after a sort of the slots' lengths each step (word_attention.py; for measuring) |
| TTS_JOBS_STEP_PRIORITY | 1 | 0: decode steps replayed on PyTorch's own stream, not the GPU's highest-priority one that lets Decoder+Vocos take only what the steps leave (step_graphs.py; 2.64 vs 2.70 ms on an H100) |
| TTS_JOBS_FUSED_SAMPLING | 1 | 0: a decode step samples with some twenty PyTorch ops, not one Triton kernel (fused_sampling.py; same tokens, 81 vs 316 us a step at 1,024 rows on an H100), and records its tokens and counters with ~20 more, not one (step_counters.py) |
| TTS_JOBS_FUSED_WAVEFORM | 1 | 0: each Decoder and Vocos block's depthwise convolution and LayerNorm run as PyTorch ops, not one Triton kernel (waveform_kernels.py) |
| TTS_JOBS_ATTENTION_INT8_BITS | 1 | 1: that kernel makes the int8 cache's codes floats by their bits; 0: by the conversion instruction (for its sweep) |
| TTS_JOBS_FAULT_AFTER_COMMIT | (none) | tests only: a process kills itself after the named commits (jobs/faults.py) |
| TTS_JOBS_FAULT_PAUSE | (none) | tests only: `stage:seconds`, holds a stage once begun (jobs/faults.py) |
| CUDA_VISIBLE_DEVICES | (every GPU) | the GPUs `worker --gpus all` serves; a pinned worker's child gets its one GPU here |
| HF_HOME | ~/.cache/huggingface | the Hugging Face cache searched for 2Noise/ChatTTS when no model dir is given |
| FLOWER_BASIC_AUTH | (none) | `user:password` of Flower's web UI; read with the rest by `tts-jobs flower` (jobs/cluster/flower.py) |
| TTS_JOBS_DATABASE_PASSWORD_FILE | (none) | a file holding the database password (a Compose secret), put into TTS_JOBS_DATABASE_URL |
| TTS_JOBS_BROKER_PASSWORD_FILE | (none) | a file holding the Redis password (a Compose secret), put into TTS_JOBS_BROKER_URL |
| FLOWER_BASIC_AUTH_FILE | (none) | a file holding FLOWER_BASIC_AUTH's `user:password` (a Compose secret) |
| FLOWER_TASKS_COLUMNS | (ours) | Flower's task columns; Flower reads it itself |
| TRITON_INTERPRET | (off) | 1: Triton kernels in its CPU interpreter; set by `python -m pipeline.bench.gpu_checks --cpu-smoke`, read by Triton |
| PATH, PYTHONPATH | (the shell's) | extended for the processes a measurement starts (`prepended`) |
| OUT | (none) | where a measurement tool (`python -m jobs.bench.workers_scaling`) leaves its results, as the device machines name it |

Read once per process (``Settings.from_env``) and handed on: the engine's slice as an ``EngineConfig``
with an ``EngineTuning`` (``engine_config``); a child process's other values as its own environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit, urlunsplit

from pipeline.errors import InputError

if TYPE_CHECKING:  # the engine's package is imported only where an engine is configured
    from pipeline.engine.config import EngineConfig, EngineTuning

# Read by huggingface_hub and tqdm when they are imported (silence_dependency_bars).
DEPENDENCY_BARS_OFF = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"}
# Read by the Rust tokenizer: its own thread pool stays off, as upstream ChatTTS sets on import (a
# process forked after using it deadlocks); the engine tokenizes big batches in threads of its own.
TOKENIZER_THREADS_OFF = {"TOKENIZERS_PARALLELISM": "false"}


@dataclass(frozen=True)
class Settings:
    data_dir: Path
    database_url: str
    broker_url: str
    model_dir: Path | None
    device: str = "auto"
    precision: str = "auto"
    memory_gib: float | None = None  # None: the whole card
    memory_fraction: float = 0.85
    max_batch: int | None = None  # None: decided by the device (pipeline/scheduling.py)
    waves: int | None = None  # None: the scheduling policy's (pipeline/scheduling.py)
    slots: int | None = None  # None: every sentence of a batch decodes at once
    stream_seconds: float = 60.0  # 0: no stream, each batch alone
    measure_helpers: int | None = None  # a synthesis worker's sentence measurers; None: one per 4 cores (8+)
    lease_seconds: float = 120.0
    visibility_timeout: int = 21_600
    max_attempts: int = 3
    cpu_worker_nice: int = 10
    log_level: str = "INFO"
    kv_cache: str | None = None  # None: the engine's default ("auto")
    engine_tuning: EngineTuning | None = None  # None: the engine's own defaults
    hf_home: Path | None = None  # None: ~/.cache/huggingface
    visible_gpus: str | None = None  # CUDA_VISIBLE_DEVICES as this process was started with
    fault_after_commit: str = ""  # tests only (jobs/faults.py)
    fault_pause: str = ""  # tests only (jobs/faults.py)
    results_dir: Path | None = None  # OUT: a measurement tool's results

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        data_dir = Path(env.get("TTS_JOBS_DATA_DIR") or _default_data_dir()).expanduser()
        model_dir = env.get("TTS_JOBS_MODEL_DIR")
        max_batch = env.get("TTS_JOBS_MAX_BATCH")
        slots = env.get("TTS_JOBS_SLOTS")
        waves = env.get("TTS_JOBS_WAVES")
        measure_helpers = env.get("TTS_JOBS_MEASURE_HELPERS")
        return cls(
            data_dir=data_dir,
            database_url=with_password(env.get("TTS_JOBS_DATABASE_URL") or f"sqlite:///{data_dir / 'tts-jobs.db'}",
                                       read_secret(env, "TTS_JOBS_DATABASE_PASSWORD_FILE")),
            broker_url=with_password(env.get("TTS_JOBS_BROKER_URL") or "redis://127.0.0.1:6379/0",
                                     read_secret(env, "TTS_JOBS_BROKER_PASSWORD_FILE")),
            model_dir=Path(model_dir).expanduser() if model_dir else None,
            device=env.get("TTS_JOBS_DEVICE", "auto"),
            precision=env.get("TTS_JOBS_PRECISION", "auto"),
            memory_gib=memory_gib(env.get("TTS_JOBS_MEMORY_GIB")),
            memory_fraction=float(env.get("TTS_JOBS_MEMORY_FRACTION", "0.85")),
            max_batch=int(max_batch) if max_batch else None,
            waves=max(1, int(waves)) if waves else None,
            slots=int(slots) if slots else None,
            stream_seconds=float(env.get("TTS_JOBS_STREAM_SECONDS", "60")),
            measure_helpers=int(measure_helpers) if measure_helpers else None,
            lease_seconds=float(env.get("TTS_JOBS_LEASE_SECONDS", "120")),
            visibility_timeout=int(env.get("TTS_JOBS_VISIBILITY_TIMEOUT", "21600")),
            max_attempts=int(env.get("TTS_JOBS_MAX_ATTEMPTS", "3")),
            cpu_worker_nice=int(env.get("TTS_JOBS_CPU_WORKER_NICE", "10")),
            log_level=env.get("TTS_JOBS_LOG_LEVEL", "INFO").upper(),
            kv_cache=env.get("TTS_JOBS_KV_CACHE") or None,
            engine_tuning=_engine_tuning(env),
            hf_home=Path(env["HF_HOME"]).expanduser() if env.get("HF_HOME") else None,
            visible_gpus=env.get("CUDA_VISIBLE_DEVICES"),
            fault_after_commit=env.get("TTS_JOBS_FAULT_AFTER_COMMIT", ""),
            fault_pause=env.get("TTS_JOBS_FAULT_PAUSE", ""),
            results_dir=Path(env["OUT"]) if env.get("OUT") else None,
        )

    def engine_config(self) -> EngineConfig:
        """The engine's slice: its weights, device, precision, memory cap and kernel choices."""
        from pipeline.engine.config import EngineConfig

        return EngineConfig(model_dir=self.model_dir, device=self.device, precision=self.precision,
                            kv_cache=self.kv_cache, memory_gib=self.memory_gib, hf_home=self.hf_home,
                            tuning=self.engine_tuning)

    @property
    def calibration_file(self) -> Path:
        """Where a GPU's memory calibration is kept for the next run on it (pipeline/engine/calibration_file.py)."""
        return self.data_dir / "cache" / "memory_models.json"

    def measure_helper_count(self) -> int:
        """Helper processes that measure a synthesis worker's sentences ahead of assembly: as set,
        else one per 4 cores this process may use from 8 cores up (none below: they would take the
        CPU from synthesis; assembly measures then). One H200 makes ~2,200 s of audio a second, a
        helper measures ~900: two (one per 8 of 16 cores) fell behind, the last batch waited 1.5 s."""
        if self.measure_helpers is not None:
            return max(0, self.measure_helpers)
        from pipeline.audio.parallel import worker_count

        cores = worker_count(0)
        return cores // 4 if cores >= 8 else 0

    def with_overrides(self, **changes: object) -> Settings:
        from dataclasses import replace

        return replace(self, **{k: v for k, v in changes.items() if v is not None})


# The engine's kernel choices (``EngineTuning``'s fields) by the variable that sets each; a variable
# left out takes the field's default
TUNING_FIELDS = {
    "TTS_JOBS_DECODE_ATTENTION": "decode_attention", "TTS_JOBS_FUSED_LAYERS": "fused_layers",
    "TTS_JOBS_CUDA_GRAPHS": "cuda_graphs", "TTS_JOBS_PREFILL_GRAPHS": "prefill_graphs",
    "TTS_JOBS_DECODE_CUDNN": "decode_cudnn", "TTS_JOBS_ATTENTION_BLOCK": "attention_block",
    "TTS_JOBS_ATTENTION_WARPS": "attention_warps", "TTS_JOBS_ATTENTION_STAGES": "attention_stages",
    "TTS_JOBS_ATTENTION_INT8_BITS": "attention_int8_bits", "TTS_JOBS_ATTENTION_KERNEL": "attention_kernel",
    "TTS_JOBS_ATTENTION_ROPE": "attention_rope", "TTS_JOBS_ATTENTION_ORDER": "attention_order",
    "TTS_JOBS_STEP_PRIORITY": "step_priority", "TTS_JOBS_CUDA_WAIT": "host_wait",
    "TTS_JOBS_FUSED_SAMPLING": "fused_sampling", "TTS_JOBS_FUSED_WAVEFORM": "fused_waveform",
}


def _engine_tuning(env: Mapping[str, str]) -> EngineTuning | None:
    """The kernel choices set in ``env``; None where none is (the engine's defaults). A switch on
    by default is off only at 0, one off by default on only at 1."""
    if not any(name in env for name in TUNING_FIELDS):
        return None
    from pipeline.engine.config import EngineTuning

    defaults = EngineTuning()
    values: dict[str, object] = {}
    for name, field in TUNING_FIELDS.items():
        default, text = getattr(defaults, field), env.get(name)
        if text is not None:
            values[field] = ((text != "0" if default else text == "1") if isinstance(default, bool)
                             else int(text) if isinstance(default, int) else text)
    return EngineTuning(**values)


def process_environment() -> dict[str, str]:
    """A copy of this process's environment, for a library that reads variables of its own
    (Flower) and for a child process."""
    return dict(os.environ)


def flower_environment() -> dict[str, str]:
    """This process's environment for Flower, FLOWER_BASIC_AUTH read from FLOWER_BASIC_AUTH_FILE (a secret)."""
    env = process_environment()
    auth = read_secret(env, "FLOWER_BASIC_AUTH_FILE")
    return {**env, "FLOWER_BASIC_AUTH": auth} if auth is not None else env


def read_secret(env: Mapping[str, str], name: str) -> str | None:
    """The contents of the file variable ``name`` names (a Compose secret, one line), or None
    when it is not set. A file that cannot be read is the operator's mistake, said in one line."""
    path = env.get(name)
    if not path:
        return None
    try:
        value = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InputError(f"{name}={path}: cannot read it ({exc.strerror}); mount the secret there "
                         f"or unset {name}") from None
    if not value:
        raise InputError(f"{name}={path}: the file is empty; write the secret into it")
    return value


def with_password(url: str, password: str | None) -> str:
    """``url`` with ``password`` as its password (quoted for a URL), when one is given."""
    if password is None:
        return url
    parts = urlsplit(url)
    if not parts.hostname:
        raise InputError(f"a password file is set but {url!r} has no host to use it with")
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{user}:{quote(password, safe='')}@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


def child_environment(**changes: str) -> dict[str, str]:
    """This process's environment with ``changes``, for a child that must see them before its imports."""
    return {**process_environment(), **changes}


def prepended(name: str, *folders: str) -> str:
    """The search path ``name`` (PATH, PYTHONPATH) with ``folders`` first, for a child's environment."""
    return os.pathsep.join(filter(None, [*folders, os.environ.get(name, "")]))


def interpret_triton() -> None:
    """Triton kernels in its CPU interpreter (a smoke run without a GPU): set before Triton's import."""
    os.environ.setdefault("TRITON_INTERPRET", "1")


def silence_dependency_bars() -> None:
    """No progress bars from the model's libraries in our logs; before their import, which reads these."""
    for name, value in DEPENDENCY_BARS_OFF.items():
        os.environ.setdefault(name, value)


def keep_tokenizer_threads_off() -> None:
    """Before an engine is loaded in this process (see TOKENIZER_THREADS_OFF)."""
    os.environ.update(TOKENIZER_THREADS_OFF)


def memory_gib(text: str | None, named: str = "TTS_JOBS_MEMORY_GIB=") -> float | None:
    """A GPU memory cap in GiB (``4``, ``7.5``); None when unset. Raises InputError naming where
    it came from (``named``: the variable, or the option)."""
    if not text:
        return None
    try:
        gib = float(text)
    except ValueError:
        gib = float("nan")
    if not gib > 0 or gib == float("inf"):
        raise InputError(f"{named}{text}: not a memory size; give GiB as a positive number, e.g. 4 or 7.5")
    return gib


def memory_gib_option(value: float | None) -> float | None:
    """``--memory-gib``, checked as the variable is (one line, exit 2)."""
    return None if value is None else memory_gib(f"{value:g}", "--memory-gib ")


def _default_data_dir() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("tts-jobs", appauthor=False))

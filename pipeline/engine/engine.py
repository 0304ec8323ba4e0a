"""The synthesis engine: requests in, float32 waveforms out, every row with its own voice and seed."""

from __future__ import annotations

import logging
import os
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from pipeline.batching import MemoryModel
from pipeline.engine.audio_io import read_reference_audio
from pipeline.engine.generation import (
    Generated,
    OnFinished,
    RowGroup,
    RowLimits,
    RowSource,
    TokenSpace,
    generate,
)
from pipeline.engine.gpt import FusedLlama
from pipeline.engine.loop_runner import score_tokens
from pipeline.engine.memory import (
    PLANNER_SHARE,
    analytic_memory_model,
    calibrate_capped_memory_model,
    calibrate_memory_model,
    device_budget_bytes,
    device_capped,
    model_with_widest_slots,
    prefill_bytes_per_position,
    release_cached_memory,
)
from pipeline.engine.modules.audio_encoder import AudioEncoder
from pipeline.engine.modules.tokenizer import TextTokenizer
from pipeline.engine.prompts import (
    PromptRow,
    TokenEmbeddings,
    code_prompt_row,
    code_prompt_text,
    embed_prompts,
    refine_prompt_text,
    text_prompt_row,
)
from pipeline.engine.sampling import RowSampling
from pipeline.engine.slots import SlotShape
from pipeline.engine.step_graphs import (
    StepRunner,
    cache_fits,
    device_bytes,
    graphs_wanted,
    rounded_positions,
)
from pipeline.engine.streaming import FetchEarly, MoreRequests, RequestStream
from pipeline.engine.timing import PhaseClock
from pipeline.engine.voices import SpeakerEmbedding, encode_audio_prompt, encode_speaker, parse_voice
from pipeline.engine.waveform import WaveformDecoder
from pipeline.engine.waveform_overlap import OnWaveform, WaveformsAlongside
from pipeline.errors import OutOfDeviceMemory, SynthesisError, TtsJobsError, VoiceError
from pipeline.lengths import MAX_TOKENS_CAP
from pipeline.types import GPT_STEPS_PER_SECOND, SynthesisRequest, SynthesisResult

log = logging.getLogger(__name__)

DEFAULT_PROMPT = "[speed_5]"
TOKEN_MEMORY = 65_536  # prompts whose token ids are remembered (a few MB)
TOKENIZE_CHUNK = 128  # prompts per tokenizer call when a batch is split across threads
WORKER_PROMPT_TOKENS = 128  # prompt room in a worker's prepared slots (a long sentence's prompt fits)


@dataclass(frozen=True)
class RefineParams:
    """Upstream's ``RefineTextParams`` defaults."""

    prompt: str = ""
    temperature: float = 0.7
    top_p: float = 0.7
    top_k: int = 20
    repetition_penalty: float = 1.0
    max_new_tokens: int = 384


@dataclass
class ModelParts:
    """What the engine runs, read from the weight files by ``loading.py``."""

    gpt: FusedLlama
    embeddings: TokenEmbeddings
    waveform: WaveformDecoder
    tokenizer: TextTokenizer
    dvae: AudioEncoder  # upstream's DVAE, loaded on first use (voices from recordings)
    speaker_std: torch.Tensor  # float16 [C]
    speaker_mean: torch.Tensor  # float16 [C]
    max_positions: int


class Engine:
    """ChatTTS with a batched, per-row generation loop. Build it with ``load_engine``."""

    def __init__(self, parts: ModelParts, *, device: str, precision: str, synthetic: bool,
                 model_root: Path) -> None:
        self.device = device
        self.precision = precision
        self.synthetic = synthetic
        self.model_root = model_root
        self._parts = parts
        self._memory: MemoryModel | None = None
        self._widest_slots_ready = False  # prepare_worker_slots allocated the widest batch's slots
        self._worker_rows: int | None = None  # the rows a worker's batches have (a stream's slots)
        self._token_ids: dict[str, list[int]] = {}  # recent prompts, tokenized
        self._voices: dict[str, Any] = {}  # recent voice strings, parsed
        self.slots: int | None = None  # most sentences decoded at once; None: the whole batch
        self.clock = PhaseClock(self._torch_device)  # where synthesis time goes (bench)
        self._runner = StepRunner(parts.gpt, self._code_space(),
                                  use_graphs=graphs_wanted(self._torch_device))

    @property
    def parts(self) -> ModelParts:
        """The loaded model's parts (GPT, embeddings, Decoder+Vocos), for measurements of one part."""
        return self._parts

    @property
    def step_runner(self) -> StepRunner:
        """The decode slots and the CUDA graphs captured over them, for measurements of one step."""
        return self._runner

    @torch.inference_mode()
    def prepare_slots(self, slots: int, prompt_tokens: int, max_new_tokens: int) -> int:
        """Allocate decode slots for ``slots`` sentences of up to ``prompt_tokens`` +
        ``max_new_tokens`` positions and capture their CUDA graphs now, not mid-batch (default
        sampling: top-k > 1 with a repetition penalty). Returns how many graphs were captured."""
        emb = self._parts.embeddings
        shape = SlotShape(capacity=slots, positions=prompt_tokens + max_new_tokens,
                          steps=max_new_tokens, codebooks=emb.codebooks, vocab=emb.vocab,
                          keep_hiddens=True)
        return self._runner.prepare(shape)

    def prepare_worker_slots(self, rows: int) -> int:
        """On CUDA: slots and graphs for the widest, longest batch a worker may be sent — ``rows``
        sentences at the 2048-token cap — if their KV cache fits ``GROWN_SLOTS_SHARE`` of the
        device (an H200: 1024 rows, 73 GB); else none (slots then grow with the batches). A
        worker calls this once after ``warm_up``: no batch then re-makes slots or captures
        graphs (each costs ~0.5 s mid-batch on an H200). Returns the graphs captured."""
        gpt = self._parts.gpt
        total = device_bytes(gpt)
        positions = rounded_positions(WORKER_PROMPT_TOKENS + MAX_TOKENS_CAP)
        if total is None:
            self._worker_rows = rows  # on CPU memory is not the limit
            return 0
        if not cache_fits(rows, positions, gpt.kv_bytes_per_position(), total):
            # a smaller (or capped) card: a stream's slots are its first batch's, as planned to fit
            return 0
        graphs = self.prepare_slots(rows, WORKER_PROMPT_TOKENS, MAX_TOKENS_CAP)
        self._worker_rows = rows
        self._widest_slots_ready = True
        return graphs

    def memory_capped(self) -> bool:
        """Whether this engine runs under a memory cap (``EngineConfig.memory_gib``)."""
        return device_capped(self._torch_device)

    def kv_bytes_per_position(self) -> int:
        """Bytes of keys and values one decode slot position holds (all layers)."""
        return self._parts.gpt.kv_bytes_per_position()

    def memory_budget_bytes(self) -> int | None:
        """GPU memory this engine may use (its cap, ``EngineConfig.memory_gib``, else the card's);
        None on CPU."""
        return device_budget_bytes(self._torch_device)

    def quantized_kv(self) -> bool:
        """Whether the decode slots keep keys and values in int8 (``EngineConfig.kv_cache``)."""
        return self._parts.gpt.quantized_kv()

    def forget_prompts(self) -> None:
        """Drop the remembered token ids and parsed voices (a benchmark's timed run must tokenize)."""
        self._token_ids.clear()
        self._voices.clear()

    def release_slots(self) -> None:
        """Free the decode slots and their CUDA graphs (they are kept between batches)."""
        self._runner.release()

    def release_device_memory(self) -> None:
        """Everything kept between batches given back: slots, graphs (and their pool), the
        allocator's cached blocks, library workspaces (``oom.py`` calls it before a retry)."""
        self.release_slots()
        release_cached_memory(self._torch_device)

    # ----------------------------------------------------------------------------- synthesis
    def synthesize(self, requests: Sequence[SynthesisRequest],
                   on_waveform: OnWaveform | None = None) -> list[SynthesisResult]:
        """One waveform per request, in order. Raises OutOfDeviceMemory when the batch does not fit
        (its slots freed first; ``oom.py`` halves and retries), VoiceError for a bad voice,
        SynthesisError for other device failures.

        ``on_waveform(index, waveform)`` is called once per request as soon as its waveform is
        on the host — on a GPU while later sentences are still generating, from another thread
        (a worker writes the WAV meanwhile); on CPU at the end."""
        if not requests:
            return []
        started = time.perf_counter()
        with WaveformsAlongside(self._parts.waveform, len(requests), self.clock,
                                on_ready=on_waveform) as alongside:
            generated = self._run(requests, keep_hiddens=True, on_finished=alongside.submit)
            with _device_errors(len(requests)):
                waves = alongside.collect()
        steps = sum(int(t.shape[0]) for t in generated.tokens)
        log.debug("synthesized %d rows (%d GPT steps, %.1f s of audio) in %.2f s on %s/%s",
                  len(requests), steps, steps / GPT_STEPS_PER_SECOND, time.perf_counter() - started, self.device,
                  self.precision)
        return [SynthesisResult(waveform=wave, gpt_steps=int(tokens.shape[0]), hit_limit=hit)
                for wave, tokens, hit in zip(waves, generated.tokens, generated.hit_limit)]

    def synthesize_stream(self, requests: Sequence[SynthesisRequest], more: MoreRequests,
                          on_result: Callable[[int, SynthesisResult], None],
                          fetch_early: FetchEarly | None = None) -> int:
        """``requests``, then every request ``more()`` returns until it returns none, through the
        same decode slots (``streaming.py``): the slots are refilled from the next requests as
        rows finish, instead of draining at the end of each call. ``on_result(index, result)`` is
        called once per request as soon as its waveform is on the host (index: its position in
        the concatenation of ``requests`` and every ``more()``); nothing is kept. ``more`` runs
        on a thread of its own, once slots free up (any slot while ``fetch_early()``). Returns the
        number of requests spoken. Raises as ``synthesize``
        does; the results handed over before an error stand."""
        spoken, first = 0, list(requests)
        while first:  # a group that another loop must run (another sampling mode) starts one
            slots = self.slots or self._worker_rows or len(first)
            stream = RequestStream(self, more, slots, first, spoken, fetch_early)
            try:
                self._stream_once(stream, slots, on_result)
            finally:
                stream.close()
            spoken += len(stream.requests)
            first = stream.leftover
        return spoken

    def _stream_once(self, stream: RequestStream, slots: int,
                     on_result: Callable[[int, SynthesisResult], None]) -> None:
        steps: dict[int, int] = {}

        def finished(rows: list[int], hiddens: list[torch.Tensor]) -> None:
            steps.update((row, int(h.shape[0])) for row, h in zip(rows, hiddens))
            alongside.submit(rows, hiddens)

        def ready(row: int, wave: np.ndarray) -> None:
            limit = stream.requests[row].max_new_tokens
            on_result(stream.first_index + row, SynthesisResult(waveform=wave, gpt_steps=steps[row],
                                                           hit_limit=steps[row] >= limit))

        with WaveformsAlongside(self._parts.waveform, None, self.clock, on_ready=ready) as alongside:
            self._run(stream.requests, keep_hiddens=True, on_finished=finished, source=stream, slots=slots)
            with _device_errors(len(stream.requests)):
                alongside.collect()

    def generate_codes(self, requests: Sequence[SynthesisRequest]) -> list[torch.Tensor]:
        """The audio tokens ``synthesize`` would decode: per request int64 [T, num_vq], EOS excluded."""
        if not requests:
            return []
        return self._run(requests, keep_hiddens=False).tokens

    def generate_hiddens(self, requests: Sequence[SynthesisRequest]) -> Generated:
        """Tokens and the GPT hidden states behind them (for fidelity checks)."""
        return self._run(requests, keep_hiddens=True)

    def decode_hiddens(self, hiddens: Sequence[torch.Tensor]) -> list[np.ndarray]:
        """Decoder + Vocos on given hidden states [T, C] (cast to this engine's decoder dtype)."""
        device = self._parts.waveform.device
        return self._parts.waveform.decode([h.to(device) for h in hiddens])

    @torch.inference_mode()
    def score_codes(self, requests: Sequence[SynthesisRequest],
                    codes: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Teacher-forced logits through the decode path (slots, their KV cache): for each request,
        float32 [T, num_vq, V] predicting ``codes[i]``."""
        parts = self._parts
        steps = max(int(c.shape[0]) for c in codes)
        forced = torch.zeros(len(codes), steps - 1, parts.embeddings.codebooks, dtype=torch.int64)
        for i, c in enumerate(codes):
            forced[i, : c.shape[0] - 1] = c[:-1]
        prompts = embed_prompts(self._code_rows(requests), parts.embeddings,
                                self._spk_emb_id, self._torch_device)
        logits = score_tokens(parts.gpt, self._code_space(), prompts, forced)
        return [logits[i, : c.shape[0]].float().cpu() for i, c in enumerate(codes)]

    @torch.inference_mode()
    def _run(self, requests: Sequence[SynthesisRequest], keep_hiddens: bool,
             on_finished: OnFinished | None = None, source: RowSource | None = None,
             slots: int | None = None) -> Generated:
        rows = self.prompt_rows(requests)
        with _device_errors(len(requests)):
            first = self.row_group(requests, rows)
            try:
                return generate(self._parts.gpt, self._runner.space, first.prompts, first.limits,
                                first.sampling, keep_hiddens=keep_hiddens, slots=slots or self.slots,
                                runner=self._runner, clock=self.clock, on_finished=on_finished,
                                source=source)
            except torch.OutOfMemoryError:
                self.release_slots()  # the halved retry must not find the big slots still held
                raise

    def prompt_rows(self, requests: Sequence[SynthesisRequest]) -> list[PromptRow]:
        """The requests checked and tokenized (host work: a stream does it on another thread)."""
        for i, request in enumerate(requests):
            self._validate(i, request)
        return self._code_rows(requests)

    @torch.inference_mode()
    def row_group(self, requests: Sequence[SynthesisRequest], rows: list[PromptRow]) -> RowGroup:
        """The requests' prompts embedded on the device, with their limits and sampling."""
        prompts = embed_prompts(rows, self._parts.embeddings, self._spk_emb_id, self._torch_device)
        sampling = RowSampling.build(
            temperature=[r.temperature for r in requests], top_p=[r.top_p for r in requests],
            top_k=[r.top_k for r in requests], penalty=[r.repetition_penalty for r in requests],
            seeds=[r.seed for r in requests], device=self._torch_device)
        limits = RowLimits(min_new=[r.min_new_tokens for r in requests],
                           max_new=[r.max_new_tokens for r in requests])
        return RowGroup(prompts=prompts, limits=limits, sampling=sampling, lengths=[len(row) for row in rows])

    def _code_rows(self, requests: Sequence[SynthesisRequest]) -> list[PromptRow]:
        voices = [self._voice(r.voice) for r in requests]
        texts = [code_prompt_text(r.text, r.prompt, v) for r, v in zip(requests, voices)]
        token_ids = self._tokenize(texts)
        return [code_prompt_row(ids, voice) for ids, voice in zip(token_ids, voices)]

    def _code_space(self) -> TokenSpace:
        emb = self._parts.embeddings
        return TokenSpace(codebooks=emb.codebooks, vocab=emb.vocab, eos=emb.vocab - 1,
                          embed=emb.code_embed, logits=emb.code_logits)

    def _validate(self, index: int, r: SynthesisRequest) -> None:
        problems = []
        if r.max_new_tokens < 1:
            problems.append(f"max_new_tokens={r.max_new_tokens} must be at least 1")
        if not 0 <= r.min_new_tokens <= r.max_new_tokens:
            problems.append(f"min_new_tokens={r.min_new_tokens} must be within [0, max_new_tokens]")
        if not r.temperature > 0:
            problems.append(f"temperature={r.temperature} must be > 0")
        if not 0 < r.top_p <= 1:
            problems.append(f"top_p={r.top_p} must be in (0, 1]")
        if r.top_k < 1:
            problems.append(f"top_k={r.top_k} must be at least 1")
        if not r.repetition_penalty > 0:
            problems.append(f"repetition_penalty={r.repetition_penalty} must be > 0")
        if r.max_new_tokens + 512 > self._parts.max_positions:
            problems.append(f"max_new_tokens={r.max_new_tokens} leaves no room for the prompt "
                            f"in {self._parts.max_positions} positions")
        if problems:
            raise ValueError(f"request {index} ({r.text[:30]!r}): " + "; ".join(problems))

    def _voice(self, voice: str):  # -> Voice
        """The parsed voice; a book reads every sentence with one or two voices, so the few
        recent ones are kept (decoding one costs ~0.1 ms, times every sentence of a batch)."""
        parsed = self._voices.get(voice)
        if parsed is None:
            parsed = self._parse_voice(voice)
            if len(self._voices) >= 64:
                self._voices.clear()
            self._voices[voice] = parsed
        return parsed

    def _parse_voice(self, voice: str):  # -> Voice
        emb = self._parts.embeddings
        parsed = parse_voice(voice, self._parts.gpt.hidden, emb.codebooks)
        if not isinstance(parsed, SpeakerEmbedding) and int(parsed.codes.max()) >= emb.vocab - 1:
            raise VoiceError("audio prompt holds codes outside the model's codebooks; make it "
                             "again with voice_from_audio")
        return parsed

    def _tokenize(self, texts: list[str]) -> list[list[int]]:
        # Prompts met at planning time are met again at synthesis: remembered, not re-tokenized.
        # The lists returned are the remembered ones: read them, never change them.
        missing = list(dict.fromkeys(t for t in texts if t not in self._token_ids))
        if missing:
            encoded = _encode_in_threads(self._parts.tokenizer.backend_tokenizer, missing)
            if len(self._token_ids) + len(missing) > TOKEN_MEMORY:
                self._token_ids.clear()
            self._token_ids.update(zip(missing, encoded))
        return [self._token_ids[t] for t in texts]

    @property
    def _torch_device(self) -> torch.device:
        return self._parts.embeddings.code_table.device

    @property
    def _spk_emb_id(self) -> int:
        return int(self._parts.tokenizer.spk_emb_ids)

    # ----------------------------------------------------------------------------- voices
    def sample_voice(self, seed: int) -> str:
        """A random speaker embedding, as upstream's ``sample_random_speaker`` draws it, but from
        ``seed`` (the same seed always gives the same voice)."""
        parts = self._parts
        generator = torch.Generator().manual_seed(int(seed))
        z = torch.randn(parts.gpt.hidden, generator=generator).half()
        vector = z * parts.speaker_std.cpu() + parts.speaker_mean.cpu()
        return encode_speaker(vector.numpy())

    @torch.inference_mode()
    def voice_from_audio(self, path: Path) -> str:
        """Upstream's DVAE-encoded reference (``spk_smp``) of a recording.

        Raises:
            VoiceError: naming the file, when it cannot be read or holds no usable speech.
        """
        wave = read_reference_audio(Path(path))
        try:
            codes = self._parts.dvae.sample_audio(torch.from_numpy(wave))
        except RuntimeError as exc:
            raise VoiceError(f"{path}: the reference audio could not be encoded ({exc}); use a "
                             "mono WAV of 2-30 s of clean speech") from exc
        return encode_audio_prompt(codes.cpu().numpy())

    # ----------------------------------------------------------------------------- planning
    def prompt_tokens(self, text: str) -> int:
        """Length of ``text``'s code prompt in tokens with the default prompt and a sampled voice."""
        return self.prompt_tokens_of([text])[0]

    def prompt_tokens_of(self, texts: Sequence[str]) -> list[int]:
        """``prompt_tokens`` of many texts in one tokenizer call."""
        voice = SpeakerEmbedding(np.zeros(1, np.float16))
        prompts = [code_prompt_text(t, DEFAULT_PROMPT, voice) for t in texts]
        return [len(ids) for ids in self._tokenize(prompts)] if prompts else []

    @property
    def calibrated_memory_model(self) -> MemoryModel | None:
        """The model ``warm_up`` measured on CUDA; None before that, and on CPU."""
        return self._memory

    def memory_model(self) -> MemoryModel:
        """Calibrated by ``warm_up`` on CUDA (with the cache's own slope once
        ``prepare_worker_slots`` holds the widest batch); an analytic, conservative model otherwise."""
        if self._memory is not None and not self._widest_slots_ready:
            return self._memory
        analytic = analytic_memory_model(self._parts.gpt, self._parts.waveform)
        return analytic if self._memory is None else model_with_widest_slots(self._memory, analytic)

    def warm_up(self) -> None:
        """Run a small batch once (kernels, allocator); on CUDA also calibrate the memory model."""
        voice = self.sample_voice(0)
        requests = [SynthesisRequest(text=t, voice=voice, seed=i, max_new_tokens=8,
                                     min_new_tokens=8) for i, t in enumerate(("warm up", "预热"))]
        self.synthesize(requests)
        if self._torch_device.type == "cuda":
            budget = self.memory_budget_bytes() if self.memory_capped() else None
            self._memory = (calibrate_capped_memory_model(self, voice, int(PLANNER_SHARE * budget),
                                                          prefill_bytes_per_position(self._parts.gpt))
                            if budget else calibrate_memory_model(self, voice))
            log.info("memory model calibrated on %s/%s: %s", self.device, self.precision,
                     self._memory)

    # ----------------------------------------------------------------------------- refine
    @torch.inference_mode()
    def refine_texts(self, texts: Sequence[str], params: RefineParams = RefineParams(),
                     seed: int = 0) -> list[str]:
        """Upstream's text-refinement pass (adds [uv_break], [laugh], ... tags), batched.

        Each text is sampled with a seed derived from ``seed`` and the text itself, so a text is
        refined the same way in any batch.
        """
        if not texts:
            return []
        parts = self._parts
        emb = parts.embeddings
        tok = parts.tokenizer
        token_ids = self._tokenize([refine_prompt_text(t, params.prompt) for t in texts])
        rows = [text_prompt_row(ids) for ids in token_ids]
        prompts = embed_prompts(rows, emb, self._spk_emb_id, self._torch_device)
        space = TokenSpace(codebooks=1, vocab=emb.text_vocab, eos=int(tok.eos_token),
                           embed=lambda t: emb.text_embed(t[:, 0]), logits=emb.text_logits)
        n = len(texts)
        sampling = RowSampling.build(
            [params.temperature] * n, [params.top_p] * n, [params.top_k] * n,
            [params.repetition_penalty] * n,
            [seed ^ zlib.crc32(t.encode()) for t in texts], self._torch_device)
        limits = RowLimits(min_new=[0] * n, max_new=[params.max_new_tokens] * n)
        with _device_errors(n):
            out = generate(parts.gpt, space, prompts, limits, sampling, keep_hiddens=False)
        break_0 = int(tok.break_0_ids)
        kept = [[int(i) for i in ids[:, 0] if int(i) < break_0] for ids in out.tokens]
        return tok.decode(kept)


class _device_errors:
    """Turn device failures into the project's errors: out of memory into OutOfDeviceMemory (which
    ``oom.py`` halves and retries), anything else the device raises into SynthesisError."""

    def __init__(self, rows: int) -> None:
        self.rows = rows

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        if exc is None or isinstance(exc, (TtsJobsError, ValueError)):
            return False
        if isinstance(exc, torch.OutOfMemoryError):
            raise OutOfDeviceMemory(f"a batch of {self.rows} ran out of device memory: {exc}") from exc
        if isinstance(exc, RuntimeError):
            raise SynthesisError(f"synthesis of a batch of {self.rows} failed on the device: "
                                 f"{exc}") from exc
        return False


_TOKENIZER_THREADS: ThreadPoolExecutor | None = None


def _forget_tokenizer_threads() -> None:
    global _TOKENIZER_THREADS
    _TOKENIZER_THREADS = None  # a forked child (Celery prefork) has none of its parent's threads


os.register_at_fork(after_in_child=_forget_tokenizer_threads)


def _encode_in_threads(fast: Any, texts: list[str]) -> list[list[int]]:
    """The Rust tokenizer's batch call (the same ids as the transformers wrapper, ~5x faster: the
    wrapper converts every encoding in Python), on chunks in a few threads. ``TextTokenizer`` switches
    the tokenizer's own parallelism off (TOKENIZERS_PARALLELISM=false, against fork
    deadlocks), and the GPU sits idle while a batch is tokenized; ``encode_batch`` releases the
    GIL, so threads give the cores back without touching that setting."""
    global _TOKENIZER_THREADS
    chunks = [texts[i:i + TOKENIZE_CHUNK] for i in range(0, len(texts), TOKENIZE_CHUNK)]
    if len(chunks) == 1:
        return [e.ids for e in fast.encode_batch(texts, add_special_tokens=False)]
    if _TOKENIZER_THREADS is None:
        _TOKENIZER_THREADS = ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1),
                                                thread_name_prefix="tokenize")
    encoded = _TOKENIZER_THREADS.map(lambda chunk: fast.encode_batch(chunk, add_special_tokens=False),
                                     chunks)
    return [e.ids for part in encoded for e in part]

"""The synthesis engine: requests in, float32 waveforms out, every row with its own voice and seed."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch

from pipeline.batching import MemoryModel
from pipeline.engine.device_errors import device_errors
from pipeline.engine.engine_memory import EngineMemory
from pipeline.engine.generation import (
    Generated,
    OnFinished,
    RowGroup,
    RowLimits,
    RowSource,
    TokenSpace,
    generate,
)
from pipeline.engine.loop_runner import score_tokens
from pipeline.engine.model_parts import ModelParts
from pipeline.engine.prompt_tokens import PromptTokens
from pipeline.engine.prompts import (
    PromptRow,
    code_prompt_row,
    code_prompt_text,
    embed_prompts,
)
from pipeline.engine.refine import RefineParams, refine_texts
from pipeline.engine.request_checks import check_request
from pipeline.engine.sampling import RowSampling
from pipeline.engine.speakers import Speakers
from pipeline.engine.step_graphs import (
    StepRunner,
    graphs_wanted,
)
from pipeline.engine.streaming import FetchEarly, MoreRequests, RequestStream
from pipeline.engine.timing import PhaseClock
from pipeline.engine.voices import SpeakerEmbedding
from pipeline.engine.waveform_overlap import OnWaveform, WaveformsAlongside
from pipeline.types import GPT_STEPS_PER_SECOND, SynthesisRequest, SynthesisResult

log = logging.getLogger(__name__)

DEFAULT_PROMPT = "[speed_5]"


class Engine(EngineMemory):
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
        self._tokenize = PromptTokens(parts.tokenizer)  # recent prompts' ids kept
        self._speakers = Speakers(parts)  # recent voices kept, parsed
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

    def graph_captures(self) -> dict[str, tuple[int, float]]:
        """Since the engine loaded, per kind of graph (decode steps, prefills, Decoder+Vocos
        chunks): how many were captured and the host seconds their shapes' first runs and
        captures took (the GPU waits for what comes after them meanwhile)."""
        runner, waveform = self._runner, self._parts.waveform.graphs
        return {"steps": (runner.captured, runner.new_kinds.seconds),
                "prefill": (runner.prefills.captured, runner.prefills.new_shapes.seconds),
                "Decoder+Vocos": (waveform.captured, waveform.new_shapes.seconds)}

    def forget_prompts(self) -> None:
        """Drop the remembered token ids and parsed voices (a benchmark's timed run must tokenize)."""
        self._tokenize.forget()
        self._speakers.forget()

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
            with device_errors(len(requests)):
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
            with device_errors(len(stream.requests)):
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
        with device_errors(len(requests)):
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
            check_request(i, request, self._parts.max_positions)
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
        voices = [self._speakers.get(r.voice) for r in requests]
        texts = [code_prompt_text(r.text, r.prompt, v) for r, v in zip(requests, voices)]
        token_ids = self._tokenize(texts)
        return [code_prompt_row(ids, voice) for ids, voice in zip(token_ids, voices)]

    def _code_space(self) -> TokenSpace:
        emb = self._parts.embeddings
        return TokenSpace(codebooks=emb.codebooks, vocab=emb.vocab, eos=emb.vocab - 1,
                          embed=emb.code_embed, logits=emb.code_logits, head=emb.code_head_logits)

    @property
    def _torch_device(self) -> torch.device:
        return self._parts.embeddings.code_table.device

    @property
    def _spk_emb_id(self) -> int:
        return int(self._parts.tokenizer.spk_emb_ids)

    # ----------------------------------------------------------------------------- voices
    def sample_voice(self, seed: int) -> str:
        """A random speaker embedding from ``seed`` (the same seed, the same voice): ``speakers.py``."""
        return self._speakers.sample(seed)

    def voice_from_audio(self, path: Path) -> str:
        """A recording's voice (upstream's ``spk_smp``); VoiceError naming the file where it has none."""
        return self._speakers.from_audio(path)

    # ----------------------------------------------------------------------------- planning
    def prompt_tokens(self, text: str) -> int:
        """Length of ``text``'s code prompt in tokens with the default prompt and a sampled voice."""
        return self.prompt_tokens_of([text])[0]

    def prompt_tokens_of(self, texts: Sequence[str]) -> list[int]:
        """``prompt_tokens`` of many texts in one tokenizer call."""
        voice = SpeakerEmbedding(np.zeros(1, np.float16))
        prompts = [code_prompt_text(t, DEFAULT_PROMPT, voice) for t in texts]
        return [len(ids) for ids in self._tokenize(prompts)] if prompts else []

    def warm_up(self, calibration_file: Path | None = None) -> None:
        """Run a small batch once (kernels, allocator); on CUDA also calibrate the memory model,
        or take the one an earlier run calibrated from ``calibration_file`` (and keep a new one there)."""
        voice = self.sample_voice(0)
        requests = [SynthesisRequest(text=t, voice=voice, seed=i, max_new_tokens=8,
                                     min_new_tokens=8) for i, t in enumerate(("warm up", "预热"))]
        self.synthesize(requests)
        if self._torch_device.type == "cuda" and self._memory is None:  # else taken before (runtime.py)
            self._calibrate(voice, calibration_file)

    # ----------------------------------------------------------------------------- refine
    def refine_texts(self, texts: Sequence[str], params: RefineParams = RefineParams(),
                     seed: int = 0) -> list[str]:
        """Upstream's text-refinement pass, batched (``refine.py``)."""
        return refine_texts(self._parts, self._tokenize, texts, params, seed)

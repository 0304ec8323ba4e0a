"""Every variable is read by jobs/settings.py and handed on as a typed slice: the engine's kernel
choices reach the engine through its config, not through the engine reading the environment."""

from __future__ import annotations

from pathlib import Path

from jobs.settings import Settings

BASE = {"TTS_JOBS_DATA_DIR": "/tmp/tts-jobs-settings"}


def test_the_engine_gets_its_weights_device_and_kernel_choices_from_the_settings() -> None:
    env = {**BASE, "TTS_JOBS_MODEL_DIR": "/models/chattts", "TTS_JOBS_KV_CACHE": "model", "HF_HOME": "/hf",
           "TTS_JOBS_FUSED_LAYERS": "0", "TTS_JOBS_CUDA_GRAPHS": "0", "TTS_JOBS_ATTENTION_BLOCK": "64",
           "TTS_JOBS_ATTENTION_STAGES": "3", "TTS_JOBS_ATTENTION_INT8_BITS": "0",
           "TTS_JOBS_ATTENTION_KERNEL": "single", "TTS_JOBS_FUSED_SAMPLING": "0", "TTS_JOBS_FUSED_WAVEFORM": "0",
           "TTS_JOBS_ATTENTION_ROPE": "0", "TTS_JOBS_STEP_PRIORITY": "0", "TTS_JOBS_ATTENTION_ORDER": "1",
           "TTS_JOBS_DECODE_CUDNN": "yes"}

    config = Settings.from_env(env).engine_config()

    assert (config.model_dir, config.kv_cache, config.hf_home) == (Path("/models/chattts"), "model", Path("/hf"))
    assert config.tuning is not None
    assert (config.tuning.fused_layers, config.tuning.cuda_graphs, config.tuning.attention_block) == (False, False, 64)
    assert config.tuning.attention_stages == 3 and not config.tuning.attention_int8_bits
    assert config.tuning.attention_kernel == "single" and not config.tuning.fused_sampling
    assert not config.tuning.fused_waveform and not config.tuning.attention_rope
    assert not config.tuning.step_priority
    assert config.tuning.attention_order
    assert not config.tuning.decode_cudnn  # a switch off by default is on only at 1
    assert config.tuning.decode_attention == "triton"  # what was not set keeps its default


def test_with_no_kernel_choice_set_the_engine_keeps_its_own() -> None:
    assert Settings.from_env(BASE).engine_config().tuning is None


def test_loading_applies_the_kernel_choices_to_the_whole_process() -> None:
    import pipeline.engine.decode_attention as decode_attention
    import pipeline.engine.fused_sampling as fused_sampling
    import pipeline.engine.gpt as gpt
    import pipeline.engine.step_graphs as step_graphs
    import pipeline.engine.waveform_kernels as waveform_kernels
    import pipeline.engine.word_attention as word_attention
    from pipeline.engine.config import EngineTuning
    from pipeline.engine.loading import apply_tuning

    try:
        apply_tuning(EngineTuning(decode_attention="sdpa", cuda_graphs=False, attention_warps=4,
                                  attention_stages=3, attention_int8_bits=False, attention_kernel="split",
                                  fused_sampling=False, fused_waveform=False, attention_rope=False,
                                  step_priority=False, attention_order=True))
        assert word_attention.LONGEST_FIRST and word_attention.STAGES == 3
        assert not fused_sampling.ON and not waveform_kernels.FUSED and not word_attention.ROPE_INSIDE
        assert not step_graphs.URGENT_STEPS
        assert (gpt.DECODE_ATTENTION, step_graphs.CUDA_GRAPHS, decode_attention.WARPS,
                decode_attention.STAGES, decode_attention.INT8_BITS) == ("sdpa", False, 4, 3, False)
        assert decode_attention.KERNEL == "split"
    finally:
        apply_tuning(EngineTuning())
    assert (gpt.DECODE_ATTENTION, step_graphs.CUDA_GRAPHS, decode_attention.WARPS,
            decode_attention.STAGES, decode_attention.INT8_BITS) == ("triton", True, 1, 2, True)
    assert decode_attention.KERNEL == "words" and fused_sampling.ON and waveform_kernels.FUSED
    assert not word_attention.LONGEST_FIRST and word_attention.STAGES == 2
    assert word_attention.ROPE_INSIDE and step_graphs.URGENT_STEPS


def test_an_attention_kernel_of_no_known_name_is_refused_in_one_line_when_the_engine_loads() -> None:
    import pytest

    from pipeline.engine.loading import apply_tuning
    from pipeline.errors import ModelError

    tuning = Settings.from_env({**BASE, "TTS_JOBS_ATTENTION_KERNEL": "fastest"}).engine_config().tuning
    with pytest.raises(ModelError, match=r"^unknown attention kernel 'fastest': use single, split, words "
                                         r"\(TTS_JOBS_ATTENTION_KERNEL\)$"):
        apply_tuning(tuning)


def test_the_test_switches_and_the_log_level_are_settings_too() -> None:
    env = {**BASE, "TTS_JOBS_FAULT_AFTER_COMMIT": "submit", "TTS_JOBS_FAULT_PAUSE": "plan:5",
           "TTS_JOBS_LOG_LEVEL": "debug", "CUDA_VISIBLE_DEVICES": "1,3"}

    settings = Settings.from_env(env)

    assert (settings.fault_after_commit, settings.fault_pause) == ("submit", "plan:5")
    assert (settings.log_level, settings.visible_gpus) == ("DEBUG", "1,3")

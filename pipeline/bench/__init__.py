"""Measurement tools beside the production stages: the engine benchmark against upstream ChatTTS
(``python -m pipeline.bench``, also ``tts-jobs bench``), the fidelity measures of a reduced
precision, and synthetic audio for tests and assembly benchmarks.

Nothing in ``pipeline/`` stages, ``jobs/`` or ``storage/`` imports from here except the thin
``tts-jobs bench`` entry point; these modules may import the stages.
"""

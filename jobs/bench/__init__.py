"""Measurement tools that need the job table or whole `tts-jobs` runs. They are commands of
``python -m pipeline.bench`` (``pipeline/bench/commands.py``), which starts them as child
processes: ``pipeline/`` imports nothing of ``jobs/`` or ``storage/``."""

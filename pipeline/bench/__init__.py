"""Every measurement tool of the project, behind one command line: ``python -m pipeline.bench
[COMMAND] ...`` (also ``tts-jobs bench``; ``commands.py`` lists them). Without a command it is the
engine benchmark against upstream ChatTTS; the others measure assembly, ingestion, whole
``tts-jobs`` runs, out-of-memory recovery, decode steps, the attention kernels and profiles.

What the tools share: the engine rows' harness (``harness.py``), the books (``books.py``,
``shelf.py``, ``novel.py``), redis-server and ffmpeg from the kit (``kit.py``), worker processes
(``processes.py``) and one GPU timer (``gpu_timing.py``). Nothing in ``pipeline/`` stages,
``jobs/`` or ``storage/`` imports from here except ``tts-jobs bench`` and ``jobs/bench/`` (the
tools that read the job table, started as child processes); these modules may import the stages.
"""

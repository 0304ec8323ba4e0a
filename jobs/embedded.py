"""The embedded default: a whole job in this process (`tts-jobs run`), on the same use cases the
workers run — submit, ingest, plan, speak every batch, assemble — one after the other."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from jobs.assemble import assemble_job
from jobs.ingest import ingest_job
from jobs.lifecycle import fail_job
from jobs.options import JobOptions
from jobs.plan import device_memory_bytes, plan_pending, register_synthesis_worker
from jobs.runtime import Runtime
from jobs.speak import synthesize_batch
from jobs.status import job_statuses
from jobs.submit import submit_book
from pipeline.errors import AssemblyError

if TYPE_CHECKING:
    from pipeline.engine import Engine

OnProgress = Callable[[int, int], None]  # (sentences done, sentences in all)


def run_book(rt: Runtime, path: Path, options: JobOptions, engine: Engine,
             on_progress: OnProgress | None = None) -> int:
    """The whole job in this process: submit, ingest, plan, synthesize every batch, assemble.

    Returns the job id; the job ends done or failed (never left running), see `job_statuses`.
    """
    job_id = submit_book(rt, path, options)
    worker = f"embedded@{socket.gethostname()}"
    try:
        register_synthesis_worker(rt, engine, worker, device_memory_bytes(engine))
        if not ingest_job(rt, job_id):
            return job_id
        for batch_id in plan_pending(rt, [job_id]):
            synthesize_batch(rt, engine, batch_id, worker="embedded", learned_by=worker)
            if on_progress:
                status = job_statuses(rt, job_id)[0]
                on_progress(status.sentences_done, status.sentences_total)
        assemble_job(rt, job_id)
    except AssemblyError:
        pass  # already recorded on the job
    except BaseException as exc:
        fail_job(rt, job_id, f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        raise
    return job_id

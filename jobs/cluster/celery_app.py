"""The Celery application: JSON only, late acknowledgement, one task at a time per process.

Queues: ``cpu`` (ingest, plan, assemble) and ``synth`` (GPU batches). Messages carry ids only.
The tasks, and what a worker process loads after the fork, are in ``jobs/cluster/tasks.py`` (``include``).
"""

from __future__ import annotations

from celery import Celery
from kombu import Exchange, Queue

from jobs.settings import Settings
from pipeline.errors import InputError

CPU_QUEUE = "cpu"
SYNTH_QUEUE = "synth"
ALL_QUEUES = (CPU_QUEUE, SYNTH_QUEUE)
REDIS_TRANSPORT = "jobs.cluster.redis_transport:Transport"


def make_celery(settings: Settings) -> Celery:
    app = Celery("tts_jobs", include=["jobs.cluster.tasks"])
    transport = {"visibility_timeout": settings.visibility_timeout}
    app.conf.update(
        broker_url=settings.broker_url,
        # kombu's Redis transport, made to log and drop a malformed queue entry instead of stopping
        broker_transport=REDIS_TRANSPORT if settings.broker_url.startswith(("redis://", "rediss://")) else None,
        # JSON only: a pickle- or yaml-typed message is refused, never executed.
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_ignore_result=True,
        # At-least-once: a message is acknowledged after its task ends, and redelivered when the
        # worker process dies mid-task. The job table makes every task idempotent.
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        # Redis redelivers unacknowledged messages after this; it must outlast any batch, or healthy
        # batches are delivered twice (the batch lease would still keep only one result).
        broker_transport_options=transport,
        visibility_timeout=settings.visibility_timeout,
        broker_connection_retry_on_startup=True,
        # One direct exchange per queue: a message sent to one queue can never land in another.
        task_queues=[Queue(q, Exchange(q, type="direct"), routing_key=q) for q in ALL_QUEUES],
        task_default_queue=CPU_QUEUE,
        task_default_exchange=CPU_QUEUE,
        task_default_routing_key=CPU_QUEUE,
        task_routes={"tts_jobs.synthesize_batch": {"queue": SYNTH_QUEUE}},
        # The child loads and warms the model in worker_process_init before it reports "up";
        # Celery's 4 s default would kill every replacement child of a GPU worker in a loop.
        worker_proc_alive_timeout=600,
        worker_send_task_events=True,  # Flower
        task_send_sent_event=True,
        worker_hijack_root_logger=False,
    )
    return app


def _settings_for_import() -> Settings:
    """The settings the app is built with when this module is imported. A secret file that
    cannot be read is not this import's to report: the command reads the settings itself and
    ends with its one error line (until then the app holds the defaults and sends nothing)."""
    try:
        return Settings.from_env()
    except InputError:
        return Settings.from_env({})


app = make_celery(_settings_for_import())

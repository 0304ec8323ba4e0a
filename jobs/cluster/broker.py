"""The Celery broker as commands meet it: checked before anything that needs it is recorded, and
a new job withdrawn when its first message cannot be sent — a job either runs or is not there.
"""

from __future__ import annotations

from collections.abc import Callable

from kombu.utils.url import maybe_sanitize_url

from jobs.cluster.celery_app import app
from pipeline.errors import BrokerUnreachable


def check_broker() -> None:
    """Raises BrokerUnreachable, in one line naming the broker (password hidden), when it does not
    answer. The connection stays in the producer pool, so the first message goes out at once."""
    try:
        with app.producer_or_acquire() as producer:
            producer.connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=3)
    except Exception as exc:  # noqa: BLE001 - kombu raises its own and the transport's errors
        raise BrokerUnreachable(broker_problem(exc)) from None


def broker_problem(exc: BaseException) -> str:
    """``cannot reach the broker at redis://…: connection refused (…)`` for a failed connection."""
    reason = str(exc).rstrip(".")
    for cause in (exc, exc.__cause__, exc.__context__):
        if isinstance(cause, OSError) and cause.strerror:
            reason = cause.strerror
            break
    if "refused" in reason.lower():
        reason = "connection refused"
    uri = maybe_sanitize_url(app.conf.broker_url)  # a password shown as **
    return f"cannot reach the broker at {uri}: {reason} (start Redis, or set TTS_JOBS_BROKER_URL)"


def queue_or_withdraw(job_id: int, send: Callable[[int], None], withdraw: Callable[[int], None],
                      withdrawn: str = "was withdrawn") -> None:
    """Send a job's next message; if the broker does not take it, ``withdraw`` the job (so that
    nothing is left waiting for a message that never comes) and raise BrokerUnreachable saying
    the job ``withdrawn``."""
    try:
        send(job_id)
    except Exception as exc:  # noqa: BLE001 - any failure to publish leaves the job without a message
        withdraw(job_id)
        raise BrokerUnreachable(f"{broker_problem(exc)}; job {job_id} {withdrawn}") from None

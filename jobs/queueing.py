"""Jobs for the workers: record, then send the message that starts them, or take the record back.

A cluster job either runs or is not there. The broker is checked before anything is recorded; a
new job whose first message the broker does not take is withdrawn (row, stored book, folder), and
a retried one is failed again, saying how to retry it; either way BrokerUnreachable says so.
`tts-jobs run` needs none of this: its jobs run in the process that records them (jobs/embedded.py).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from jobs import bulk, faults
from jobs.choices.options import JobOptions
from jobs.cluster import messages
from jobs.cluster.broker import check_broker, queue_or_withdraw
from jobs.lifecycle import RetryPlan, fail_job, retry_job
from jobs.runtime import Runtime
from jobs.submit import check_options, submit_book, withdraw_job
from pipeline.errors import BookError
from storage.models import utcnow


@dataclass(frozen=True)
class Submission:
    """One book of a submit: its queued job, or why it was not recorded."""

    book: Path
    job_id: int | None = None
    error: BookError | None = None


def submit_to_workers(rt: Runtime, books: Sequence[Path], options: JobOptions) -> Iterator[Submission]:
    """Record each book as a job and send its first message, book by book (a bad book is a
    Submission with its error; the others still go). The options and the broker are checked
    first: OptionError or BrokerUnreachable before anything is recorded."""
    check_options(rt, options)
    check_broker()
    submitted_at = utcnow()  # one submission: its books are spoken largest first
    for book in books:
        try:
            job_id = submit_book(rt, book, options, submitted_at=submitted_at)
        except BookError as exc:
            yield Submission(book, error=exc)
            continue
        faults.after_commit("submit")
        queue_or_withdraw(job_id, lambda job: messages.send_ingest(rt, job), lambda job: withdraw_job(rt, job))
        yield Submission(book, job_id=job_id)


def retry_on_workers(rt: Runtime, job_id: int) -> RetryPlan:
    """Reopen a stopped cluster job where it stopped and send its next step to the workers."""
    check_broker()
    plan = retry_job(rt, job_id)
    queue_or_withdraw(job_id, lambda _: messages.send_next_step(rt, plan),
                      lambda _: fail_job(rt, job_id, "could not be queued: the broker did not answer; "
                                                     f"run `tts-jobs retry {job_id}` once it does"),
                      withdrawn="stays failed")
    return plan


def submit_inbox_to_workers(rt: Runtime, inbox: Path, options: bulk.BulkOptions) -> list[bulk.BookOutcome]:
    """A bulk run's submissions (jobs/bulk.py), each sent to the workers as it is recorded."""
    check_options(rt, options.job)
    check_broker()  # before any book is recorded: each one either runs or is left for the next run
    return bulk.submit_inbox(rt, inbox, options, enqueue=lambda job: messages.send_ingest(rt, job))

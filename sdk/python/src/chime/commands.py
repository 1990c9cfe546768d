"""Job commands as chime's Go producer builds them (schema/command)."""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import datetime, timezone

from google.protobuf import timestamp_pb2

from chime.v1 import job_pb2


class _Entropy:
    """os.urandom drawn a page at a time: a system call per id cost more than the rest of a publish."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buf = b""
        self._at = 0

    def take(self, n: int) -> bytes:
        with self._lock:
            if self._at + n > len(self._buf):
                self._buf, self._at = os.urandom(4096), 0
            out = self._buf[self._at:self._at + n]
            self._at += n
            return out


_entropy = _Entropy()


def new_id() -> str:
    """A command id: a UUIDv7 (time-ordered, random bits from os.urandom), as Go's command.NewID makes."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(_entropy.take(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64 | 0b10 << 62 | (rand & ((1 << 62) - 1))
    return str(uuid.UUID(int=value))


def timestamp(t: datetime) -> timestamp_pb2.Timestamp:
    """A protobuf Timestamp of an aware datetime (naive ones are taken as UTC)."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(t.astimezone(timezone.utc))
    return ts


def stamp(cmd: job_pb2.JobCommand, now: datetime | None = None) -> None:
    """Fill in command_id and issued_at where unset (a republished command keeps its id)."""
    if not cmd.command_id:
        cmd.command_id = new_id()
    if not cmd.HasField("issued_at"):
        if now is None:
            cmd.issued_at.FromNanoseconds(time.time_ns())
        else:
            cmd.issued_at.CopyFrom(timestamp(now))


def kind(cmd: job_pb2.JobCommand) -> str:
    """The command's kind, as the chime-command header carries it ("upsert", ...)."""
    return cmd.WhichOneof("command") or ""


def upsert(spec: job_pb2.JobSpec) -> job_pb2.JobCommand:
    """Create the job, or replace its spec and reschedule it."""
    return job_pb2.JobCommand(namespace=spec.namespace, job_id=spec.id, upsert=job_pb2.Upsert(spec=spec))


def cancel(namespace: str, job_id: str, reason: str = "") -> job_pb2.JobCommand:
    """Stop the job for good."""
    return job_pb2.JobCommand(namespace=namespace, job_id=job_id, cancel=job_pb2.Cancel(reason=reason))


def pause(namespace: str, job_id: str) -> job_pb2.JobCommand:
    """Stop the job from firing until resumed."""
    return job_pb2.JobCommand(namespace=namespace, job_id=job_id, pause=job_pb2.Pause())


def resume(namespace: str, job_id: str) -> job_pb2.JobCommand:
    """Let a paused job fire again."""
    return job_pb2.JobCommand(namespace=namespace, job_id=job_id, resume=job_pb2.Resume())


def trigger(namespace: str, job_id: str) -> job_pb2.JobCommand:
    """Fire the job once now, beside its schedule (its own fire number and idempotency key)."""
    return job_pb2.JobCommand(namespace=namespace, job_id=job_id, trigger=job_pb2.Trigger())


def http_job(
    namespace: str,
    job_id: str,
    url: str,
    *,
    at: datetime | None = None,
    every_s: float | None = None,
    cron: str | None = None,
    timezone_name: str = "",
    method: str = "",
    headers: dict[str, str] | None = None,
    body: bytes = b"",
    labels: dict[str, str] | None = None,
    max_fires: int = 0,
) -> job_pb2.JobSpec:
    """A job spec with an HTTP callback and one of ``at``, ``every_s`` or ``cron``.

    ``max_fires`` ends a recurring job after its schedule fired that many times (0: no limit).
    """
    spec = job_pb2.JobSpec(namespace=namespace, id=job_id, labels=labels or {}, max_fires=max_fires)
    spec.target.http.url = url
    spec.target.http.method = method
    spec.target.http.body = body
    spec.target.http.headers.update(headers or {})
    if at is not None:
        spec.schedule.at.CopyFrom(timestamp(at))
    elif every_s is not None:
        spec.schedule.every.interval.FromNanoseconds(int(every_s * 1e9))
    elif cron is not None:
        spec.schedule.cron.expr = cron
        spec.schedule.cron.timezone = timezone_name
    return spec

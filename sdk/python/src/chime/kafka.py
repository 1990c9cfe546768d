"""Publish job commands straight to chime's Kafka topic, as the Go producer does.

Each command is validated (:mod:`chime.validate`), stamped with a command id
and issued_at, encoded as the protobuf ``chime.v1.JobCommand``, keyed
``namespace/job_id``, given the ``chime-command`` header, and put on the
partition goka reads that key from (:mod:`chime.partition`; never Kafka's
default partitioner). The producer is idempotent with ``acks=all``, and
batches with a linger. Every publish returns a
:class:`concurrent.futures.Future` that resolves to a :class:`Receipt` once
Kafka has acknowledged the command, or fails with :class:`PublishError`.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import confluent_kafka

from chime import commands
from chime.partition import job_key, partition_of
from chime.topics import HEADER_COMMAND, job_commands
from chime.validate import ValidationError, validate_batch, validate_command
from chime.v1 import job_pb2

DEFAULT_LINGER_MS = 5
"""How long records wait for others to share their batch (Go: producer's defaultLinger)."""

# The files `chime dev` writes into its state dir (infra/config).
KAFKA_BROKERS_FILE = "kafka-brokers"
KAFKA_CREDENTIAL_FILE = "kafka-credential"


@dataclass(frozen=True)
class Receipt:
    """A published command: its id, and where Kafka stored it."""

    command_id: str
    partition: int
    offset: int


class PublishError(Exception):
    """Kafka did not acknowledge a command; it may or may not be published."""

    def __init__(self, command_id: str, key: str, error: object):
        super().__init__(f"chime: publish command {command_id} for {key}: {error}")
        self.command_id = command_id
        self.key = key
        self.error = error


class Publisher:
    """Publishes job commands to ``<prefix>job-commands``. Thread-safe; share one per process."""

    def __init__(
        self,
        brokers: str | Iterable[str],
        *,
        topic_prefix: str = "",
        sasl_user: str = "",
        sasl_password: str = "",
        client_id: str = "chime-producer-py",
        linger_ms: int = DEFAULT_LINGER_MS,
        config: dict[str, object] | None = None,
    ):
        if (sasl_user == "") != (sasl_password == ""):
            raise ValueError("chime: give both the SASL user and its password, or neither")
        servers = brokers if isinstance(brokers, str) else ",".join(brokers)
        conf: dict[str, object] = {
            "bootstrap.servers": servers,
            "client.id": client_id,
            "linger.ms": linger_ms,
            "queue.buffering.max.messages": 1_000_000,
            "batch.num.messages": 10_000,
            # KIP-714 client metrics: chime's brokers ask for none.
            "enable.metrics.push": False,
            **(config or {}),
        }
        if sasl_user:
            conf.update({
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanisms": "PLAIN",
                "sasl.username": sasl_user,
                "sasl.password": sasl_password,
            })
        # chime's requirements win over config: every in-sync replica has a
        # command before it counts as published, and retries never write
        # one twice.
        conf.update({"enable.idempotence": True, "acks": "all"})
        self._producer = confluent_kafka.Producer(conf)
        self.topic = job_commands(topic_prefix)
        self._partitions = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="chime-publisher-poll", daemon=True)
        self._poller.start()

    @classmethod
    def from_state_dir(cls, state_dir: str | Path, **kwargs) -> "Publisher":
        """A publisher for the embedded broker of a ``chime dev`` that keeps its state in state_dir."""
        d = Path(state_dir)
        brokers = (d / KAFKA_BROKERS_FILE).read_text().strip()
        user, _, password = (d / KAFKA_CREDENTIAL_FILE).read_text().strip().partition(":")
        return cls(brokers, sasl_user=user, sasl_password=password, **kwargs)

    def _poll(self) -> None:
        while not self._closed.is_set():
            self._producer.poll(0.05)

    def partitions(self) -> int:
        """The job-commands topic's partition count (read once from the brokers)."""
        with self._lock:
            if self._partitions == 0:
                md = self._producer.list_topics(self.topic, timeout=10)
                t = md.topics.get(self.topic)
                if t is None or t.error is not None or not t.partitions:
                    raise PublishError("", self.topic, f"topic {self.topic!r} is not there ({t.error if t else 'no metadata'}): "
                                       "chime creates it; is chime running, and is this its broker and topic prefix?")
                self._partitions = len(t.partitions)
            return self._partitions

    def publish(self, cmd: job_pb2.JobCommand) -> "Future[Receipt]":
        """Validate, stamp and publish cmd; the future resolves once Kafka acknowledged it.

        A command that fails validation raises :class:`chime.validate.ValidationError`
        at once and publishes nothing.
        """
        commands.stamp(cmd)
        if cmd.WhichOneof("command") == "batch":
            for sub in cmd.batch.commands:
                commands.stamp(sub)
            validate_batch(cmd)
        else:
            validate_command(cmd)
        key = job_key(cmd.namespace, cmd.job_id)
        fut: Future[Receipt] = Future()
        fut.set_running_or_notify_cancel()
        command_id = cmd.command_id

        def delivered(err, msg) -> None:
            if err is not None:
                fut.set_exception(PublishError(command_id, key, err))
            else:
                fut.set_result(Receipt(command_id, msg.partition(), msg.offset()))

        value = cmd.SerializeToString()
        partition = partition_of(key, self.partitions())
        headers = [(HEADER_COMMAND, commands.kind(cmd).encode())]
        while True:
            try:
                self._producer.produce(self.topic, value=value, key=key.encode(), partition=partition,
                                       headers=headers, on_delivery=delivered)
                return fut
            except BufferError:
                # The local queue is full: wait for acknowledgements.
                self._producer.poll(0.1)

    def schedule(self, spec: job_pb2.JobSpec) -> "Future[Receipt]":
        """Create the job spec describes, or replace its spec (an upsert)."""
        return self.publish(commands.upsert(spec))

    def schedule_many(self, specs: Iterable[job_pb2.JobSpec]) -> "list[Future[Receipt]]":
        """Publish an upsert per spec; each future answers for its own job.

        Every command is validated before any is published (as Go's
        ScheduleMany): if one is invalid, nothing is published and the
        ValidationError's field names its index (``specs[i].<field>``).
        """
        cmds = [commands.upsert(s) for s in specs]
        for i, cmd in enumerate(cmds):
            commands.stamp(cmd)
            try:
                validate_command(cmd)
            except ValidationError as e:
                e.field = f"specs[{i}].{e.field}"
                raise
        return [self.publish(c) for c in cmds]

    def cancel(self, namespace: str, job_id: str, reason: str = "") -> "Future[Receipt]":
        return self.publish(commands.cancel(namespace, job_id, reason))

    def pause(self, namespace: str, job_id: str) -> "Future[Receipt]":
        return self.publish(commands.pause(namespace, job_id))

    def resume(self, namespace: str, job_id: str) -> "Future[Receipt]":
        return self.publish(commands.resume(namespace, job_id))

    def trigger(self, namespace: str, job_id: str) -> "Future[Receipt]":
        return self.publish(commands.trigger(namespace, job_id))

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until every command published so far is acknowledged (or failed)."""
        left = self._producer.flush(timeout)
        if left:
            raise TimeoutError(f"chime: {left} commands not acknowledged within {timeout}s")

    def close(self, timeout: float = 30.0) -> None:
        """Flush, then stop the delivery thread."""
        try:
            self.flush(timeout)
        finally:
            self._closed.set()
            self._poller.join()
            self._producer.close()

    def __enter__(self) -> "Publisher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

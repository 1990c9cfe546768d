"""Checks a job command before it is published, as chime's Go producer does.

This is a port of Go's ``schema.ValidateCommand`` (schema/validate.go): the
same fields, limits and error fields, so a command this SDK accepts is one
the Go producer accepts. ``schema/testdata/commands.json`` holds commands
and the field Go's validation names for each; the tests hold this module
to it.

One part is left to chime: the schedule's expression itself (a cron
expression's syntax, a time zone's name, an interval's range) is checked
by the scheduler, which rejects a bad one on the rejections topic with the
command's id (the API checks it before it accepts the job). Here a
schedule must only set exactly one of ``at``, ``every`` and ``cron``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from chime.v1 import job_pb2

MAX_NAMESPACE_LEN = 63
MAX_JOB_ID_LEN = 128
MAX_URL_LEN = 2048
MAX_HEADERS = 50
MAX_HEADER_NAME_LEN = 256
MAX_HEADER_VALUE_LEN = 8 << 10
MAX_HEADERS_BYTES = 16 << 10
MAX_KAFKA_KEY = 4 << 10
MAX_HTTP_BODY = 64 << 10
MAX_HTTP_TIMEOUT_S = 60
MAX_KAFKA_VALUE = 512 << 10
MAX_KAFKA_TOPIC_LEN = 249
MAX_RETRY_ATTEMPTS = 100
MAX_RETRY_MULTIPLIER = 10
MAX_RELEVANCY_WINDOW_S = 30 * 24 * 3600
MAX_LABELS = 32
MAX_LABEL_KEY_LEN = 63
MAX_LABEL_VALUE_LEN = 256
MAX_BATCH_COMMANDS = 1000
RESERVED_JOB_ID_PREFIX = "_chime."

_NAMESPACE_HELP = "a-z, 0-9, '_' and '-', starting with a letter or digit"
_JOB_ID_HELP = "A-Z, a-z, 0-9 and _ . : @ -"
_TOPIC_HELP = "A-Z, a-z, 0-9 and . _ -"
_LABEL_KEY_HELP = "A-Z, a-z, 0-9 and _ . - /"
_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
_ALNUM = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_URI_CHARS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;=%"
)
_TOKEN_EXTRA = frozenset(b"!#$%&'*+-.^_`|~")


@dataclass
class ValidationError(ValueError):
    """Which field of a command is wrong, and why (Go: schema.ValidationError)."""

    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}" if self.field else self.reason


def _invalid(field: str, reason: str) -> ValidationError:
    return ValidationError(field, reason)


def _check_namespace(field: str, ns: str) -> ValidationError | None:
    if ns == "":
        return _invalid(field, f"is empty; give 1-{MAX_NAMESPACE_LEN} characters of {_NAMESPACE_HELP}")
    raw = ns.encode()
    if len(raw) > MAX_NAMESPACE_LEN:
        return _invalid(field, f"{ns!r} is {len(raw)} bytes long; the limit is {MAX_NAMESPACE_LEN}")
    for i, b in enumerate(raw):
        ok = (0x61 <= b <= 0x7A) or (0x30 <= b <= 0x39) or (i > 0 and b in b"_-")
        if not ok:
            return _invalid(field, f"{ns!r} has {chr(b)!r} at byte {i}; use only {_NAMESPACE_HELP}")
    return None


def _check_job_id(field: str, job_id: str) -> ValidationError | None:
    if job_id == "":
        return _invalid(field, f"is empty; give 1-{MAX_JOB_ID_LEN} characters of {_JOB_ID_HELP}")
    raw = job_id.encode()
    if len(raw) > MAX_JOB_ID_LEN:
        return _invalid(field, f"is {len(raw)} bytes long; the limit is {MAX_JOB_ID_LEN}")
    for i, b in enumerate(raw):
        if b not in _ALNUM and b not in b"_.:@-":
            if b == 0x2F:
                return _invalid(field, f"{job_id!r} contains '/', which separates namespace and job id in keys; use only {_JOB_ID_HELP}")
            return _invalid(field, f"{job_id!r} has {chr(b)!r} at byte {i}; use only {_JOB_ID_HELP}")
    return None


def _check_not_reserved(field: str, job_id: str) -> ValidationError | None:
    if job_id.startswith(RESERVED_JOB_ID_PREFIX):
        return _invalid(field, f"{job_id!r} starts with {RESERVED_JOB_ID_PREFIX!r}, which is reserved for chime's own jobs; choose another id")
    return None


def _duration_s(d) -> float:
    return d.seconds + d.nanos / 1e9


def _check_duration(field: str, d) -> tuple[float, ValidationError | None]:
    if (d.seconds > 0 and d.nanos < 0) or (d.seconds < 0 and d.nanos > 0) or abs(d.nanos) >= 1_000_000_000:
        return 0.0, _invalid(field, "invalid duration; seconds and nanos must share a sign")
    if abs(d.seconds) > 9_223_372_035:
        return 0.0, _invalid(field, f"{d.seconds}s is out of range")
    return _duration_s(d), None


def _check_timestamp(field: str, ts) -> ValidationError | None:
    # 0001-01-01 to 9999-12-31, nanos in [0, 1e9) (protobuf's Timestamp rules).
    if not (-62135596800 <= ts.seconds <= 253402300799) or not (0 <= ts.nanos < 1_000_000_000):
        return _invalid(field, "invalid timestamp; it must lie between 0001-01-01 and 9999-12-31 with nanos in [0, 1e9)")
    return None


def validate_command(cmd: job_pb2.JobCommand | None) -> None:
    """Raise :class:`ValidationError` if Go's producer would refuse ``cmd``."""
    err = _validate(cmd)
    if err is not None:
        raise err


def validate_batch(cmd: job_pb2.JobCommand) -> None:
    """Check a batch and each of its commands (the first error names it)."""
    validate_command(cmd)
    for i, sub in enumerate(cmd.batch.commands):
        err = _validate(sub)
        if err is not None:
            err.field = f"batch.commands[{i}].{err.field}"
            raise err


def _validate(cmd: job_pb2.JobCommand | None) -> ValidationError | None:
    if cmd is None:
        return _invalid("", "command is nil")
    if cmd.command_id == "":
        return _invalid("command_id", "is empty; give every command a unique id (a UUID, say), so rejections and events can echo it")
    err = _check_namespace("namespace", cmd.namespace)
    if err:
        return err
    err = _check_not_reserved("job_id", cmd.job_id) or _check_job_id("job_id", cmd.job_id)
    if err:
        return err
    if cmd.HasField("issued_at"):
        err = _check_timestamp("issued_at", cmd.issued_at)
        if err:
            return err
    kind = cmd.WhichOneof("command")
    if kind == "upsert":
        return _validate_upsert(cmd, cmd.upsert)
    if kind in ("cancel", "pause", "resume", "trigger"):
        return None
    if kind == "backfill":
        b = cmd.backfill
        for name in ("from", "to"):
            field = f"backfill.{name}"
            if not b.HasField(name):
                return _invalid(field, "is not set; a backfill covers [from, to)")
            err = _check_timestamp(field, getattr(b, name))
            if err:
                return err
        if (b.to.seconds, b.to.nanos) <= (getattr(b, "from").seconds, getattr(b, "from").nanos):
            return _invalid("backfill.to", "is not after from; a backfill covers [from, to)")
        return None
    if kind == "batch":
        cmds = cmd.batch.commands
        if len(cmds) == 0:
            return _invalid("batch.commands", f"is empty; a batch carries 1 to {MAX_BATCH_COMMANDS} commands")
        if len(cmds) > MAX_BATCH_COMMANDS:
            return _invalid("batch.commands", f"has {len(cmds)} commands; a batch carries at most {MAX_BATCH_COMMANDS}")
        if cmds[0].namespace != cmd.namespace or cmds[0].job_id != cmd.job_id:
            return _invalid("batch.commands[0]", f"is for {cmds[0].namespace}/{cmds[0].job_id}, not the batch's own {cmd.namespace}/{cmd.job_id}: a batch is keyed by its first command")
        for i, sub in enumerate(cmds):
            if sub.WhichOneof("command") == "batch":
                return _invalid(f"batch.commands[{i}]", "is a batch; batches do not nest")
        return None
    if kind in ("retry", "defer", "ack"):
        # Answers to due events are the dispatchers' to publish; checked
        # as Go checks them.
        sub = getattr(cmd, kind)
        if sub.fire_seq == 0:
            return _invalid(f"{kind}.fire_seq", "is 0; occurrences are numbered from 1, echo the fire_seq of the due event")
        if kind == "retry" and sub.attempt < 2:
            return _invalid("retry.attempt", f"is {sub.attempt}; a retry is attempt 2 or later (attempt 1 is the first call)")
        if kind in ("retry", "defer"):
            if not sub.HasField("not_before"):
                return _invalid(f"{kind}.not_before", "is not set; give the earliest time the occurrence may go out again")
            return _check_timestamp(f"{kind}.not_before", sub.not_before)
        if sub.result == 0:
            return _invalid("ack.result", "is unspecified; say how the occurrence ended (SUCCEEDED, FAILED, DEAD or EXPIRED)")
        return None
    return _invalid("command", "none is set; set exactly one of upsert, cancel, pause, resume, retry, defer, ack, trigger, batch, backfill")


def _validate_upsert(cmd: job_pb2.JobCommand, u: job_pb2.Upsert) -> ValidationError | None:
    if not u.HasField("spec"):
        return _invalid("upsert.spec", "is not set; an upsert carries the job's full spec")
    spec = u.spec
    if spec.namespace != cmd.namespace:
        return _invalid("upsert.spec.namespace", f"is {spec.namespace!r} but the command's namespace is {cmd.namespace!r}; they must be equal")
    if spec.id != cmd.job_id:
        return _invalid("upsert.spec.id", f"is {spec.id!r} but the command's job_id is {cmd.job_id!r}; they must be equal")
    if not spec.HasField("schedule") or spec.schedule.WhichOneof("kind") is None:
        return _invalid("upsert.spec.schedule", "is not set; set exactly one of at, every, cron")
    err = _validate_target("upsert.spec.target", spec.target)
    if err:
        return err
    if spec.HasField("retry"):
        err = _validate_retry("upsert.spec.retry", spec.retry)
        if err:
            return err
    if spec.HasField("relevancy_window"):
        field = "upsert.spec.relevancy_window"
        window, err = _check_duration(field, spec.relevancy_window)
        if err:
            return err
        if window <= 0:
            return _invalid(field, f"is {window}s; it must be positive (leave it unset for the namespace's window)")
        if window > MAX_RELEVANCY_WINDOW_S:
            return _invalid(field, f"is {window}s; it must be at most 720h0m0s (30 days)")
    if spec.catchup not in job_pb2.CatchupPolicy.values():
        return _invalid("upsert.spec.catchup", f"{spec.catchup} is not a known catch-up policy; use LATEST, NONE or ALL")
    if spec.HasField("catchup_window"):
        w, err = _check_duration("upsert.spec.catchup_window", spec.catchup_window)
        if err:
            return err
        if w <= 0 or w > MAX_RELEVANCY_WINDOW_S:
            return _invalid("upsert.spec.catchup_window", f"is {w}s; it must be positive and at most 720h0m0s (30 days)")
    if spec.overlap not in job_pb2.OverlapPolicy.values():
        return _invalid("upsert.spec.overlap", f"{spec.overlap} is not a known overlap policy; use ALLOW_ALL, SKIP, BUFFER_ONE or CANCEL_OTHER")
    return _validate_labels("upsert.spec.labels", dict(spec.labels))


def _validate_target(field: str, t: job_pb2.Target) -> ValidationError | None:
    kind = t.WhichOneof("kind")
    if kind == "http":
        return _validate_http(field + ".http", t.http)
    if kind == "kafka":
        return _validate_kafka(field + ".kafka", t.kafka)
    return _invalid(field, "none is set; set exactly one of http, kafka")


def _validate_http(field: str, h: job_pb2.HttpCallback) -> ValidationError | None:
    err = _check_url(field + ".url", h.url)
    if err:
        return err
    if h.method not in ("",) + _METHODS:
        hint = f" (methods are case-sensitive: write {h.method.upper()!r})" if h.method.upper() in _METHODS else ""
        return _invalid(field + ".method", f"{h.method!r} is not supported{hint}; use GET, POST, PUT, PATCH or DELETE, or leave it empty for POST")
    err = _validate_headers(field + ".headers", dict(h.headers))
    if err:
        return err
    if len(h.body) > MAX_HTTP_BODY:
        return _invalid(field + ".body", f"is {len(h.body)} bytes; the limit is {MAX_HTTP_BODY} (64 KiB): send a reference to the payload instead")
    if h.HasField("timeout"):
        d, err = _check_duration(field + ".timeout", h.timeout)
        if err:
            return err
        if d <= 0 or d > MAX_HTTP_TIMEOUT_S:
            return _invalid(field + ".timeout", f"is {d}s; it must be in (0, 1m0s], or unset for the default (10s)")
    return None


# A byte URLs do not allow, or a '%' not followed by two hex digits: the
# common case (none) is one regex search; a hit is then walked for the
# precise message.
_URL_BAD = re.compile(r"[^A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]|%(?![0-9A-Fa-f]{2})")


def _check_url(field: str, raw: str) -> ValidationError | None:
    if raw == "":
        return _invalid(field, "is empty; give the absolute http or https URL to call")
    if len(raw.encode()) > MAX_URL_LEN:
        return _invalid(field, f"is {len(raw.encode())} bytes long; the limit is {MAX_URL_LEN}")
    for i, c in enumerate(raw if _URL_BAD.search(raw) else ""):
        if c == "%":
            if i + 2 >= len(raw) or raw[i + 1] not in "0123456789abcdefABCDEF" or raw[i + 2] not in "0123456789abcdefABCDEF":
                return _invalid(field, f"{raw!r} has '%' at byte {i} not followed by two hex digits; write %25 for a literal '%'")
        elif c == " ":
            return _invalid(field, f"{raw!r} has a space at byte {i}; percent-encode it as %20")
        elif c not in _URI_CHARS:
            return _invalid(field, f"{raw!r} has {c!r} at byte {i}, which URLs do not allow unencoded; percent-encode it")
    try:
        u = urlsplit(raw)
    except ValueError as e:
        return _invalid(field, f"{raw!r} does not parse ({e}); give an absolute http or https URL")
    if u.scheme not in ("http", "https"):
        return _invalid(field, f"{raw!r} has scheme {u.scheme!r}; give an absolute http or https URL")
    if "@" in u.netloc:
        return _invalid(field, f"{raw!r} contains credentials; remove them from the URL and send them in a header")
    if not u.hostname:
        return _invalid(field, f"{raw!r} has no host; give an absolute URL such as https://example.com/hook")
    return None


def _is_token(s: str) -> bool:
    raw = s.encode()
    return raw != b"" and all(b in _ALNUM or b in _TOKEN_EXTRA for b in raw)


def _is_reserved_header(name: str) -> bool:
    lower = name.lower()
    return lower in ("idempotency-key", "host", "content-length", "transfer-encoding", "connection") or lower.startswith(("x-chime-", "webhook-"))


def _validate_headers(field: str, headers: dict[str, str]) -> ValidationError | None:
    if len(headers) > MAX_HEADERS:
        return _invalid(field, f"has {len(headers)} entries; the limit is {MAX_HEADERS}")
    total = 0
    for name in sorted(headers, key=lambda k: k.encode()):
        value = headers[name]
        f = f'{field}["{name}"]'
        if len(name.encode()) > MAX_HEADER_NAME_LEN:
            return _invalid(field, f"a header name is {len(name.encode())} bytes long; the limit is {MAX_HEADER_NAME_LEN}")
        if len(value.encode()) > MAX_HEADER_VALUE_LEN:
            return _invalid(f, f"value is {len(value.encode())} bytes long; the limit is {MAX_HEADER_VALUE_LEN} (8 KiB)")
        total += len(name.encode()) + len(value.encode())
        if total > MAX_HEADERS_BYTES:
            return _invalid(field, f"names and values add up to more than {MAX_HEADERS_BYTES} bytes (16 KiB); send large data in the body")
        if not _is_token(name):
            return _invalid(f, f"{name!r} is not a valid header name; use letters, digits and !#$%&'*+-.^_`|~")
        if _is_reserved_header(name):
            return _invalid(f, f"{name!r} is set by chime on every call (reserved: Idempotency-Key, Host, Content-Length, Transfer-Encoding, Connection, X-Chime-*, Webhook-*); remove it")
        for i, ch in enumerate(value):
            if (ord(ch) < 0x20 and ch != "\t") or ord(ch) == 0x7F:
                return _invalid(f, f"value has control character {ch!r} at byte {i} (CR, LF, NUL and other controls except tab would break or smuggle headers); remove it")
    return None


def _validate_kafka(field: str, k: job_pb2.KafkaTarget) -> ValidationError | None:
    topic = k.topic
    if topic == "":
        return _invalid(field + ".topic", "is empty; give the topic to write to")
    if len(topic.encode()) > MAX_KAFKA_TOPIC_LEN:
        return _invalid(field + ".topic", f"is {len(topic.encode())} bytes long; Kafka allows at most {MAX_KAFKA_TOPIC_LEN}")
    if topic in (".", ".."):
        return _invalid(field + ".topic", f"{topic!r} is not a valid Kafka topic name")
    for i, b in enumerate(topic.encode()):
        if b not in _ALNUM and b not in b"._-":
            return _invalid(field + ".topic", f"{topic!r} has {chr(b)!r} at byte {i}; Kafka topic names use only {_TOPIC_HELP}")
    if len(k.value) > MAX_KAFKA_VALUE:
        return _invalid(field + ".value", f"is {len(k.value)} bytes; the limit is {MAX_KAFKA_VALUE} (512 KiB)")
    if len(k.key) > MAX_KAFKA_KEY:
        return _invalid(field + ".key", f"is {len(k.key)} bytes; the limit is {MAX_KAFKA_KEY} (4 KiB)")
    if len(k.headers) > MAX_HEADERS:
        return _invalid(field + ".headers", f"has {len(k.headers)} entries; the limit is {MAX_HEADERS}")
    total = sum(len(n.encode()) + len(v.encode()) for n, v in k.headers.items())
    if total > MAX_HEADERS_BYTES:
        return _invalid(field + ".headers", f"names and values add up to {total} bytes; the limit is {MAX_HEADERS_BYTES} (16 KiB)")
    return None


def _validate_retry(field: str, r) -> ValidationError | None:
    if r.max_attempts > MAX_RETRY_ATTEMPTS:
        return _invalid(field + ".max_attempts", f"is {r.max_attempts}; the limit is {MAX_RETRY_ATTEMPTS}")
    values: dict[str, float] = {}
    for name in ("initial_interval", "max_interval", "max_elapsed"):
        if not r.HasField(name):
            continue
        v, err = _check_duration(f"{field}.{name}", getattr(r, name))
        if err:
            return err
        if v < 0:
            return _invalid(f"{field}.{name}", f"is {v}s; it must not be negative (0 takes the namespace's value)")
        values[name] = v
    initial, maximum = values.get("initial_interval", 0), values.get("max_interval", 0)
    if initial > 0 and 0 < maximum < initial:
        return _invalid(field + ".max_interval", f"is {maximum}s, shorter than initial_interval ({initial}s); raise it or lower initial_interval")
    if r.multiplier != 0 and not (1 <= r.multiplier <= MAX_RETRY_MULTIPLIER):
        return _invalid(field + ".multiplier", f"is {r.multiplier}; it must be 0 (the namespace's value) or between 1 and {MAX_RETRY_MULTIPLIER}")
    if not (0 <= r.jitter <= 1):
        return _invalid(field + ".jitter", f"is {r.jitter}; it is a randomization factor in [0, 1]")
    return None


def _validate_labels(field: str, labels: dict[str, str]) -> ValidationError | None:
    if len(labels) > MAX_LABELS:
        return _invalid(field, f"has {len(labels)} entries; the limit is {MAX_LABELS}")
    for k in sorted(labels, key=lambda s: s.encode()):
        f = f'{field}["{k}"]'
        raw = k.encode()
        if raw == b"" or len(raw) > MAX_LABEL_KEY_LEN:
            return _invalid(f, f"key is {len(raw)} bytes long; give 1-{MAX_LABEL_KEY_LEN} characters of {_LABEL_KEY_HELP}")
        for i, b in enumerate(raw):
            if b not in _ALNUM and b not in b"_.-/":
                return _invalid(f, f"key has {chr(b)!r} at byte {i}; use only {_LABEL_KEY_HELP}")
        if len(labels[k]) > MAX_LABEL_VALUE_LEN:
            return _invalid(f, f"value is {len(labels[k])} characters long; the limit is {MAX_LABEL_VALUE_LEN}")
    return None

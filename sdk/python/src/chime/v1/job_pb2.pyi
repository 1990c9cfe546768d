import datetime

from chime.v1 import outcome_pb2 as _outcome_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CatchupPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CATCHUP_POLICY_UNSPECIFIED: _ClassVar[CatchupPolicy]
    CATCHUP_POLICY_LATEST: _ClassVar[CatchupPolicy]
    CATCHUP_POLICY_NONE: _ClassVar[CatchupPolicy]
    CATCHUP_POLICY_ALL: _ClassVar[CatchupPolicy]

class OverlapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OVERLAP_POLICY_UNSPECIFIED: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_ALLOW_ALL: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_SKIP: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_BUFFER_ONE: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_CANCEL_OTHER: _ClassVar[OverlapPolicy]

class AckResult(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACK_RESULT_UNSPECIFIED: _ClassVar[AckResult]
    ACK_RESULT_SUCCEEDED: _ClassVar[AckResult]
    ACK_RESULT_FAILED: _ClassVar[AckResult]
    ACK_RESULT_DEAD: _ClassVar[AckResult]
    ACK_RESULT_EXPIRED: _ClassVar[AckResult]
CATCHUP_POLICY_UNSPECIFIED: CatchupPolicy
CATCHUP_POLICY_LATEST: CatchupPolicy
CATCHUP_POLICY_NONE: CatchupPolicy
CATCHUP_POLICY_ALL: CatchupPolicy
OVERLAP_POLICY_UNSPECIFIED: OverlapPolicy
OVERLAP_POLICY_ALLOW_ALL: OverlapPolicy
OVERLAP_POLICY_SKIP: OverlapPolicy
OVERLAP_POLICY_BUFFER_ONE: OverlapPolicy
OVERLAP_POLICY_CANCEL_OTHER: OverlapPolicy
ACK_RESULT_UNSPECIFIED: AckResult
ACK_RESULT_SUCCEEDED: AckResult
ACK_RESULT_FAILED: AckResult
ACK_RESULT_DEAD: AckResult
ACK_RESULT_EXPIRED: AckResult

class Schedule(_message.Message):
    __slots__ = ("at", "every", "cron", "jitter", "exclude")
    AT_FIELD_NUMBER: _ClassVar[int]
    EVERY_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FIELD_NUMBER: _ClassVar[int]
    at: _timestamp_pb2.Timestamp
    every: Every
    cron: Cron
    jitter: _duration_pb2.Duration
    exclude: _containers.RepeatedCompositeFieldContainer[Exclusion]
    def __init__(self, at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., every: _Optional[_Union[Every, _Mapping]] = ..., cron: _Optional[_Union[Cron, _Mapping]] = ..., jitter: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., exclude: _Optional[_Iterable[_Union[Exclusion, _Mapping]]] = ...) -> None: ...

class Exclusion(_message.Message):
    __slots__ = ("date", "cron", "duration", "timezone")
    DATE_FIELD_NUMBER: _ClassVar[int]
    CRON_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    date: str
    cron: str
    duration: _duration_pb2.Duration
    timezone: str
    def __init__(self, date: _Optional[str] = ..., cron: _Optional[str] = ..., duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., timezone: _Optional[str] = ...) -> None: ...

class Every(_message.Message):
    __slots__ = ("interval", "start_at", "end_at")
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    START_AT_FIELD_NUMBER: _ClassVar[int]
    END_AT_FIELD_NUMBER: _ClassVar[int]
    interval: _duration_pb2.Duration
    start_at: _timestamp_pb2.Timestamp
    end_at: _timestamp_pb2.Timestamp
    def __init__(self, interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., start_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Cron(_message.Message):
    __slots__ = ("expr", "timezone", "start_at", "end_at")
    EXPR_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    START_AT_FIELD_NUMBER: _ClassVar[int]
    END_AT_FIELD_NUMBER: _ClassVar[int]
    expr: str
    timezone: str
    start_at: _timestamp_pb2.Timestamp
    end_at: _timestamp_pb2.Timestamp
    def __init__(self, expr: _Optional[str] = ..., timezone: _Optional[str] = ..., start_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class HttpCallback(_message.Message):
    __slots__ = ("url", "method", "headers", "body", "timeout", "json_body")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    URL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    JSON_BODY_FIELD_NUMBER: _ClassVar[int]
    url: str
    method: str
    headers: _containers.ScalarMap[str, str]
    body: bytes
    timeout: _duration_pb2.Duration
    json_body: bool
    def __init__(self, url: _Optional[str] = ..., method: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., body: _Optional[bytes] = ..., timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., json_body: _Optional[bool] = ...) -> None: ...

class KafkaTarget(_message.Message):
    __slots__ = ("topic", "key", "value", "headers")
    class HeadersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    key: bytes
    value: bytes
    headers: _containers.ScalarMap[str, str]
    def __init__(self, topic: _Optional[str] = ..., key: _Optional[bytes] = ..., value: _Optional[bytes] = ..., headers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Target(_message.Message):
    __slots__ = ("http", "kafka")
    HTTP_FIELD_NUMBER: _ClassVar[int]
    KAFKA_FIELD_NUMBER: _ClassVar[int]
    http: HttpCallback
    kafka: KafkaTarget
    def __init__(self, http: _Optional[_Union[HttpCallback, _Mapping]] = ..., kafka: _Optional[_Union[KafkaTarget, _Mapping]] = ...) -> None: ...

class RetryPolicy(_message.Message):
    __slots__ = ("max_attempts", "initial_interval", "max_interval", "multiplier", "jitter", "max_elapsed")
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    INITIAL_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    MAX_INTERVAL_FIELD_NUMBER: _ClassVar[int]
    MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    JITTER_FIELD_NUMBER: _ClassVar[int]
    MAX_ELAPSED_FIELD_NUMBER: _ClassVar[int]
    max_attempts: int
    initial_interval: _duration_pb2.Duration
    max_interval: _duration_pb2.Duration
    multiplier: float
    jitter: float
    max_elapsed: _duration_pb2.Duration
    def __init__(self, max_attempts: _Optional[int] = ..., initial_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_interval: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., multiplier: _Optional[float] = ..., jitter: _Optional[float] = ..., max_elapsed: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class JobSpec(_message.Message):
    __slots__ = ("namespace", "id", "schedule", "target", "retry", "relevancy_window", "labels", "max_fires", "pause_on_failure", "overlap", "catchup", "catchup_window")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    RELEVANCY_WINDOW_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MAX_FIRES_FIELD_NUMBER: _ClassVar[int]
    PAUSE_ON_FAILURE_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    CATCHUP_FIELD_NUMBER: _ClassVar[int]
    CATCHUP_WINDOW_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    id: str
    schedule: Schedule
    target: Target
    retry: RetryPolicy
    relevancy_window: _duration_pb2.Duration
    labels: _containers.ScalarMap[str, str]
    max_fires: int
    pause_on_failure: bool
    overlap: OverlapPolicy
    catchup: CatchupPolicy
    catchup_window: _duration_pb2.Duration
    def __init__(self, namespace: _Optional[str] = ..., id: _Optional[str] = ..., schedule: _Optional[_Union[Schedule, _Mapping]] = ..., target: _Optional[_Union[Target, _Mapping]] = ..., retry: _Optional[_Union[RetryPolicy, _Mapping]] = ..., relevancy_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., max_fires: _Optional[int] = ..., pause_on_failure: _Optional[bool] = ..., overlap: _Optional[_Union[OverlapPolicy, str]] = ..., catchup: _Optional[_Union[CatchupPolicy, str]] = ..., catchup_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class JobCommand(_message.Message):
    __slots__ = ("command_id", "issued_at", "namespace", "job_id", "upsert", "cancel", "pause", "resume", "retry", "defer", "ack", "trigger", "batch", "backfill")
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    UPSERT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    PAUSE_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    DEFER_FIELD_NUMBER: _ClassVar[int]
    ACK_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_FIELD_NUMBER: _ClassVar[int]
    command_id: str
    issued_at: _timestamp_pb2.Timestamp
    namespace: str
    job_id: str
    upsert: Upsert
    cancel: Cancel
    pause: Pause
    resume: Resume
    retry: Retry
    defer: Defer
    ack: Ack
    trigger: Trigger
    batch: Batch
    backfill: Backfill
    def __init__(self, command_id: _Optional[str] = ..., issued_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., namespace: _Optional[str] = ..., job_id: _Optional[str] = ..., upsert: _Optional[_Union[Upsert, _Mapping]] = ..., cancel: _Optional[_Union[Cancel, _Mapping]] = ..., pause: _Optional[_Union[Pause, _Mapping]] = ..., resume: _Optional[_Union[Resume, _Mapping]] = ..., retry: _Optional[_Union[Retry, _Mapping]] = ..., defer: _Optional[_Union[Defer, _Mapping]] = ..., ack: _Optional[_Union[Ack, _Mapping]] = ..., trigger: _Optional[_Union[Trigger, _Mapping]] = ..., batch: _Optional[_Union[Batch, _Mapping]] = ..., backfill: _Optional[_Union[Backfill, _Mapping]] = ...) -> None: ...

class Batch(_message.Message):
    __slots__ = ("commands",)
    COMMANDS_FIELD_NUMBER: _ClassVar[int]
    commands: _containers.RepeatedCompositeFieldContainer[JobCommand]
    def __init__(self, commands: _Optional[_Iterable[_Union[JobCommand, _Mapping]]] = ...) -> None: ...

class Upsert(_message.Message):
    __slots__ = ("spec",)
    SPEC_FIELD_NUMBER: _ClassVar[int]
    spec: JobSpec
    def __init__(self, spec: _Optional[_Union[JobSpec, _Mapping]] = ...) -> None: ...

class Cancel(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class Pause(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Resume(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Trigger(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Backfill(_message.Message):
    __slots__ = ("to",)
    FROM_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    to: _timestamp_pb2.Timestamp
    def __init__(self, to: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., **kwargs) -> None: ...

class Retry(_message.Message):
    __slots__ = ("fire_seq", "emit_seq", "attempt", "not_before", "reason", "outcome")
    FIRE_SEQ_FIELD_NUMBER: _ClassVar[int]
    EMIT_SEQ_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    fire_seq: int
    emit_seq: int
    attempt: int
    not_before: _timestamp_pb2.Timestamp
    reason: str
    outcome: _outcome_pb2.CallbackOutcome
    def __init__(self, fire_seq: _Optional[int] = ..., emit_seq: _Optional[int] = ..., attempt: _Optional[int] = ..., not_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., outcome: _Optional[_Union[_outcome_pb2.CallbackOutcome, _Mapping]] = ...) -> None: ...

class Defer(_message.Message):
    __slots__ = ("fire_seq", "emit_seq", "not_before", "reason")
    FIRE_SEQ_FIELD_NUMBER: _ClassVar[int]
    EMIT_SEQ_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    fire_seq: int
    emit_seq: int
    not_before: _timestamp_pb2.Timestamp
    reason: str
    def __init__(self, fire_seq: _Optional[int] = ..., emit_seq: _Optional[int] = ..., not_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("fire_seq", "emit_seq", "attempt", "result", "detail")
    FIRE_SEQ_FIELD_NUMBER: _ClassVar[int]
    EMIT_SEQ_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    fire_seq: int
    emit_seq: int
    attempt: int
    result: AckResult
    detail: str
    def __init__(self, fire_seq: _Optional[int] = ..., emit_seq: _Optional[int] = ..., attempt: _Optional[int] = ..., result: _Optional[_Union[AckResult, str]] = ..., detail: _Optional[str] = ...) -> None: ...

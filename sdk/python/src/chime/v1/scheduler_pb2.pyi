import datetime

from chime.v1 import job_pb2 as _job_pb2
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

class JobStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATUS_UNSPECIFIED: _ClassVar[JobStatus]
    JOB_STATUS_SCHEDULED: _ClassVar[JobStatus]
    JOB_STATUS_PAUSED: _ClassVar[JobStatus]
    JOB_STATUS_COMPLETED: _ClassVar[JobStatus]
    JOB_STATUS_CANCELLED: _ClassVar[JobStatus]
    JOB_STATUS_DEAD: _ClassVar[JobStatus]

class JobEventType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_EVENT_TYPE_UNSPECIFIED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_CREATED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_UPDATED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_FIRED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_SKIPPED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_PAUSED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_RESUMED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_CANCELLED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_COMPLETED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_DEAD: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_RETRY_SCHEDULED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_DEFERRED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_EXPIRED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_REDELIVERED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_TRIGGERED: _ClassVar[JobEventType]
    JOB_EVENT_TYPE_SUPERSEDED: _ClassVar[JobEventType]
JOB_STATUS_UNSPECIFIED: JobStatus
JOB_STATUS_SCHEDULED: JobStatus
JOB_STATUS_PAUSED: JobStatus
JOB_STATUS_COMPLETED: JobStatus
JOB_STATUS_CANCELLED: JobStatus
JOB_STATUS_DEAD: JobStatus
JOB_EVENT_TYPE_UNSPECIFIED: JobEventType
JOB_EVENT_TYPE_CREATED: JobEventType
JOB_EVENT_TYPE_UPDATED: JobEventType
JOB_EVENT_TYPE_FIRED: JobEventType
JOB_EVENT_TYPE_SKIPPED: JobEventType
JOB_EVENT_TYPE_PAUSED: JobEventType
JOB_EVENT_TYPE_RESUMED: JobEventType
JOB_EVENT_TYPE_CANCELLED: JobEventType
JOB_EVENT_TYPE_COMPLETED: JobEventType
JOB_EVENT_TYPE_DEAD: JobEventType
JOB_EVENT_TYPE_RETRY_SCHEDULED: JobEventType
JOB_EVENT_TYPE_DEFERRED: JobEventType
JOB_EVENT_TYPE_EXPIRED: JobEventType
JOB_EVENT_TYPE_REDELIVERED: JobEventType
JOB_EVENT_TYPE_TRIGGERED: JobEventType
JOB_EVENT_TYPE_SUPERSEDED: JobEventType

class Pending(_message.Message):
    __slots__ = ("fire_seq", "attempt", "not_before", "scheduled_at", "deferrals", "history")
    FIRE_SEQ_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    DEFERRALS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    fire_seq: int
    attempt: int
    not_before: _timestamp_pb2.Timestamp
    scheduled_at: _timestamp_pb2.Timestamp
    deferrals: int
    history: _containers.RepeatedCompositeFieldContainer[_outcome_pb2.CallbackOutcome]
    def __init__(self, fire_seq: _Optional[int] = ..., attempt: _Optional[int] = ..., not_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., deferrals: _Optional[int] = ..., history: _Optional[_Iterable[_Union[_outcome_pb2.CallbackOutcome, _Mapping]]] = ...) -> None: ...

class Emission(_message.Message):
    __slots__ = ("fire_seq", "emit_seq", "attempt", "scheduled_at", "deferrals", "emitted_at", "redeliveries", "deadline", "history", "incarnation", "fire_at")
    FIRE_SEQ_FIELD_NUMBER: _ClassVar[int]
    EMIT_SEQ_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    DEFERRALS_FIELD_NUMBER: _ClassVar[int]
    EMITTED_AT_FIELD_NUMBER: _ClassVar[int]
    REDELIVERIES_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    FIRE_AT_FIELD_NUMBER: _ClassVar[int]
    fire_seq: int
    emit_seq: int
    attempt: int
    scheduled_at: _timestamp_pb2.Timestamp
    deferrals: int
    emitted_at: _timestamp_pb2.Timestamp
    redeliveries: int
    deadline: _timestamp_pb2.Timestamp
    history: _containers.RepeatedCompositeFieldContainer[_outcome_pb2.CallbackOutcome]
    incarnation: str
    fire_at: _timestamp_pb2.Timestamp
    def __init__(self, fire_seq: _Optional[int] = ..., emit_seq: _Optional[int] = ..., attempt: _Optional[int] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., deferrals: _Optional[int] = ..., emitted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., redeliveries: _Optional[int] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., history: _Optional[_Iterable[_Union[_outcome_pb2.CallbackOutcome, _Mapping]]] = ..., incarnation: _Optional[str] = ..., fire_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class JobState(_message.Message):
    __slots__ = ("spec", "status", "fire_seq", "next_scheduled_at", "timer_at", "pending", "open", "emit_seq", "created_at", "updated_at", "anchor", "fires", "skipped", "last_result", "last_fired_at", "last_command_id", "last_detail", "last_scheduled_at", "unconfirmed", "recover_at", "held_command", "held_until", "tick_at", "scheduled_fires", "buffered")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FIRE_SEQ_FIELD_NUMBER: _ClassVar[int]
    NEXT_SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    TIMER_AT_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    EMIT_SEQ_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    FIRES_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    LAST_RESULT_FIELD_NUMBER: _ClassVar[int]
    LAST_FIRED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_DETAIL_FIELD_NUMBER: _ClassVar[int]
    LAST_SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    UNCONFIRMED_FIELD_NUMBER: _ClassVar[int]
    RECOVER_AT_FIELD_NUMBER: _ClassVar[int]
    HELD_COMMAND_FIELD_NUMBER: _ClassVar[int]
    HELD_UNTIL_FIELD_NUMBER: _ClassVar[int]
    TICK_AT_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FIRES_FIELD_NUMBER: _ClassVar[int]
    BUFFERED_FIELD_NUMBER: _ClassVar[int]
    spec: _job_pb2.JobSpec
    status: JobStatus
    fire_seq: int
    next_scheduled_at: _timestamp_pb2.Timestamp
    timer_at: _timestamp_pb2.Timestamp
    pending: _containers.RepeatedCompositeFieldContainer[Pending]
    open: _containers.RepeatedCompositeFieldContainer[Emission]
    emit_seq: int
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    anchor: _timestamp_pb2.Timestamp
    fires: int
    skipped: int
    last_result: _job_pb2.AckResult
    last_fired_at: _timestamp_pb2.Timestamp
    last_command_id: str
    last_detail: str
    last_scheduled_at: _timestamp_pb2.Timestamp
    unconfirmed: _containers.RepeatedCompositeFieldContainer[Delivery]
    recover_at: _timestamp_pb2.Timestamp
    held_command: bytes
    held_until: _timestamp_pb2.Timestamp
    tick_at: _timestamp_pb2.Timestamp
    scheduled_fires: int
    buffered: Buffered
    def __init__(self, spec: _Optional[_Union[_job_pb2.JobSpec, _Mapping]] = ..., status: _Optional[_Union[JobStatus, str]] = ..., fire_seq: _Optional[int] = ..., next_scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., timer_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., pending: _Optional[_Iterable[_Union[Pending, _Mapping]]] = ..., open: _Optional[_Iterable[_Union[Emission, _Mapping]]] = ..., emit_seq: _Optional[int] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., anchor: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fires: _Optional[int] = ..., skipped: _Optional[int] = ..., last_result: _Optional[_Union[_job_pb2.AckResult, str]] = ..., last_fired_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_command_id: _Optional[str] = ..., last_detail: _Optional[str] = ..., last_scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., unconfirmed: _Optional[_Iterable[_Union[Delivery, _Mapping]]] = ..., recover_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., held_command: _Optional[bytes] = ..., held_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., tick_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., scheduled_fires: _Optional[int] = ..., buffered: _Optional[_Union[Buffered, _Mapping]] = ...) -> None: ...

class Delivery(_message.Message):
    __slots__ = ("fire_seq", "target", "delivered_at", "incarnation", "redeliveries")
    FIRE_SEQ_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_AT_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    REDELIVERIES_FIELD_NUMBER: _ClassVar[int]
    fire_seq: int
    target: _job_pb2.KafkaTarget
    delivered_at: _timestamp_pb2.Timestamp
    incarnation: str
    redeliveries: int
    def __init__(self, fire_seq: _Optional[int] = ..., target: _Optional[_Union[_job_pb2.KafkaTarget, _Mapping]] = ..., delivered_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., incarnation: _Optional[str] = ..., redeliveries: _Optional[int] = ...) -> None: ...

class Tick(_message.Message):
    __slots__ = ("timer_at", "sent_at")
    TIMER_AT_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    timer_at: _timestamp_pb2.Timestamp
    sent_at: _timestamp_pb2.Timestamp
    def __init__(self, timer_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., sent_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Due(_message.Message):
    __slots__ = ("namespace", "job_id", "fire_seq", "emit_seq", "attempt", "scheduled_at", "fire_at", "emitted_at", "deadline", "callback", "retry", "labels", "idempotency_key", "deferrals", "relevancy_window", "history", "shard", "spread", "recall", "batch")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_SEQ_FIELD_NUMBER: _ClassVar[int]
    EMIT_SEQ_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    FIRE_AT_FIELD_NUMBER: _ClassVar[int]
    EMITTED_AT_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    CALLBACK_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    DEFERRALS_FIELD_NUMBER: _ClassVar[int]
    RELEVANCY_WINDOW_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    RECALL_FIELD_NUMBER: _ClassVar[int]
    BATCH_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    job_id: str
    fire_seq: int
    emit_seq: int
    attempt: int
    scheduled_at: _timestamp_pb2.Timestamp
    fire_at: _timestamp_pb2.Timestamp
    emitted_at: _timestamp_pb2.Timestamp
    deadline: _timestamp_pb2.Timestamp
    callback: _job_pb2.HttpCallback
    retry: _job_pb2.RetryPolicy
    labels: _containers.ScalarMap[str, str]
    idempotency_key: str
    deferrals: int
    relevancy_window: _duration_pb2.Duration
    history: _containers.RepeatedCompositeFieldContainer[_outcome_pb2.CallbackOutcome]
    shard: int
    spread: int
    recall: bool
    batch: _containers.RepeatedCompositeFieldContainer[Due]
    def __init__(self, namespace: _Optional[str] = ..., job_id: _Optional[str] = ..., fire_seq: _Optional[int] = ..., emit_seq: _Optional[int] = ..., attempt: _Optional[int] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fire_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., emitted_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., deadline: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., callback: _Optional[_Union[_job_pb2.HttpCallback, _Mapping]] = ..., retry: _Optional[_Union[_job_pb2.RetryPolicy, _Mapping]] = ..., labels: _Optional[_Mapping[str, str]] = ..., idempotency_key: _Optional[str] = ..., deferrals: _Optional[int] = ..., relevancy_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., history: _Optional[_Iterable[_Union[_outcome_pb2.CallbackOutcome, _Mapping]]] = ..., shard: _Optional[int] = ..., spread: _Optional[int] = ..., recall: _Optional[bool] = ..., batch: _Optional[_Iterable[_Union[Due, _Mapping]]] = ...) -> None: ...

class Buffered(_message.Message):
    __slots__ = ("fire_seq", "scheduled_at")
    FIRE_SEQ_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    fire_seq: int
    scheduled_at: _timestamp_pb2.Timestamp
    def __init__(self, fire_seq: _Optional[int] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class JobEvent(_message.Message):
    __slots__ = ("event_id", "namespace", "job_id", "type", "at", "fire_seq", "attempt", "count", "first_scheduled_at", "last_scheduled_at", "detail", "command_id")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    FIRE_SEQ_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    FIRST_SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    namespace: str
    job_id: str
    type: JobEventType
    at: _timestamp_pb2.Timestamp
    fire_seq: int
    attempt: int
    count: int
    first_scheduled_at: _timestamp_pb2.Timestamp
    last_scheduled_at: _timestamp_pb2.Timestamp
    detail: str
    command_id: str
    def __init__(self, event_id: _Optional[str] = ..., namespace: _Optional[str] = ..., job_id: _Optional[str] = ..., type: _Optional[_Union[JobEventType, str]] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fire_seq: _Optional[int] = ..., attempt: _Optional[int] = ..., count: _Optional[int] = ..., first_scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., detail: _Optional[str] = ..., command_id: _Optional[str] = ...) -> None: ...

class Rejection(_message.Message):
    __slots__ = ("event_id", "command_id", "namespace", "job_id", "reason", "field", "at", "topic", "partition", "offset", "command", "command_size")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    COMMAND_SIZE_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    command_id: str
    namespace: str
    job_id: str
    reason: str
    field: str
    at: _timestamp_pb2.Timestamp
    topic: str
    partition: int
    offset: int
    command: bytes
    command_size: int
    def __init__(self, event_id: _Optional[str] = ..., command_id: _Optional[str] = ..., namespace: _Optional[str] = ..., job_id: _Optional[str] = ..., reason: _Optional[str] = ..., field: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., topic: _Optional[str] = ..., partition: _Optional[int] = ..., offset: _Optional[int] = ..., command: _Optional[bytes] = ..., command_size: _Optional[int] = ...) -> None: ...

import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BreakerState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BREAKER_STATE_UNSPECIFIED: _ClassVar[BreakerState]
    BREAKER_STATE_CLOSED: _ClassVar[BreakerState]
    BREAKER_STATE_OPEN: _ClassVar[BreakerState]
    BREAKER_STATE_HALF_OPEN: _ClassVar[BreakerState]
    BREAKER_STATE_DISABLED: _ClassVar[BreakerState]
    BREAKER_STATE_FORCED_OPEN: _ClassVar[BreakerState]
    BREAKER_STATE_FORCED_CLOSED: _ClassVar[BreakerState]
BREAKER_STATE_UNSPECIFIED: BreakerState
BREAKER_STATE_CLOSED: BreakerState
BREAKER_STATE_OPEN: BreakerState
BREAKER_STATE_HALF_OPEN: BreakerState
BREAKER_STATE_DISABLED: BreakerState
BREAKER_STATE_FORCED_OPEN: BreakerState
BREAKER_STATE_FORCED_CLOSED: BreakerState

class WindowStats(_message.Message):
    __slots__ = ("requests", "failures", "slow_calls", "failure_rate", "slow_call_rate", "p50_ms", "p99_ms", "avg_ms")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    SLOW_CALLS_FIELD_NUMBER: _ClassVar[int]
    FAILURE_RATE_FIELD_NUMBER: _ClassVar[int]
    SLOW_CALL_RATE_FIELD_NUMBER: _ClassVar[int]
    P50_MS_FIELD_NUMBER: _ClassVar[int]
    P99_MS_FIELD_NUMBER: _ClassVar[int]
    AVG_MS_FIELD_NUMBER: _ClassVar[int]
    requests: int
    failures: int
    slow_calls: int
    failure_rate: float
    slow_call_rate: float
    p50_ms: float
    p99_ms: float
    avg_ms: float
    def __init__(self, requests: _Optional[int] = ..., failures: _Optional[int] = ..., slow_calls: _Optional[int] = ..., failure_rate: _Optional[float] = ..., slow_call_rate: _Optional[float] = ..., p50_ms: _Optional[float] = ..., p99_ms: _Optional[float] = ..., avg_ms: _Optional[float] = ...) -> None: ...

class Bucket(_message.Message):
    __slots__ = ("start_unix_ms", "requests", "failures", "slow_calls", "latency_sum_ms", "latency_hist")
    START_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    SLOW_CALLS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_SUM_MS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_HIST_FIELD_NUMBER: _ClassVar[int]
    start_unix_ms: int
    requests: int
    failures: int
    slow_calls: int
    latency_sum_ms: int
    latency_hist: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, start_unix_ms: _Optional[int] = ..., requests: _Optional[int] = ..., failures: _Optional[int] = ..., slow_calls: _Optional[int] = ..., latency_sum_ms: _Optional[int] = ..., latency_hist: _Optional[_Iterable[int]] = ...) -> None: ...

class BreakerStatus(_message.Message):
    __slots__ = ("namespace", "state", "since", "next_check_at", "consecutive_trips", "probes_granted", "probes_succeeded", "window", "buckets", "cool_off", "version", "reason", "bucket_width_ms", "last_command_id")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    NEXT_CHECK_AT_FIELD_NUMBER: _ClassVar[int]
    CONSECUTIVE_TRIPS_FIELD_NUMBER: _ClassVar[int]
    PROBES_GRANTED_FIELD_NUMBER: _ClassVar[int]
    PROBES_SUCCEEDED_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    COOL_OFF_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    BUCKET_WIDTH_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    state: BreakerState
    since: _timestamp_pb2.Timestamp
    next_check_at: _timestamp_pb2.Timestamp
    consecutive_trips: int
    probes_granted: int
    probes_succeeded: int
    window: WindowStats
    buckets: _containers.RepeatedCompositeFieldContainer[Bucket]
    cool_off: _duration_pb2.Duration
    version: int
    reason: str
    bucket_width_ms: int
    last_command_id: str
    def __init__(self, namespace: _Optional[str] = ..., state: _Optional[_Union[BreakerState, str]] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., next_check_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., consecutive_trips: _Optional[int] = ..., probes_granted: _Optional[int] = ..., probes_succeeded: _Optional[int] = ..., window: _Optional[_Union[WindowStats, _Mapping]] = ..., buckets: _Optional[_Iterable[_Union[Bucket, _Mapping]]] = ..., cool_off: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., version: _Optional[int] = ..., reason: _Optional[str] = ..., bucket_width_ms: _Optional[int] = ..., last_command_id: _Optional[str] = ...) -> None: ...

class BreakerTransition(_message.Message):
    __slots__ = ("event_id", "namespace", "to", "reason", "at", "window", "consecutive_trips", "cool_off")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    TO_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    CONSECUTIVE_TRIPS_FIELD_NUMBER: _ClassVar[int]
    COOL_OFF_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    namespace: str
    to: BreakerState
    reason: str
    at: _timestamp_pb2.Timestamp
    window: WindowStats
    consecutive_trips: int
    cool_off: _duration_pb2.Duration
    def __init__(self, event_id: _Optional[str] = ..., namespace: _Optional[str] = ..., to: _Optional[_Union[BreakerState, str]] = ..., reason: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., window: _Optional[_Union[WindowStats, _Mapping]] = ..., consecutive_trips: _Optional[int] = ..., cool_off: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., **kwargs) -> None: ...

class BreakerTimer(_message.Message):
    __slots__ = ("namespace", "version", "fire_at")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FIRE_AT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    version: int
    fire_at: _timestamp_pb2.Timestamp
    def __init__(self, namespace: _Optional[str] = ..., version: _Optional[int] = ..., fire_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class BreakerCommand(_message.Message):
    __slots__ = ("command_id", "namespace", "issued_at", "note", "force_open", "force_closed", "auto", "reset_breaker")
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    FORCE_OPEN_FIELD_NUMBER: _ClassVar[int]
    FORCE_CLOSED_FIELD_NUMBER: _ClassVar[int]
    AUTO_FIELD_NUMBER: _ClassVar[int]
    RESET_BREAKER_FIELD_NUMBER: _ClassVar[int]
    command_id: str
    namespace: str
    issued_at: _timestamp_pb2.Timestamp
    note: str
    force_open: BreakerForceOpen
    force_closed: BreakerForceClosed
    auto: BreakerAuto
    reset_breaker: BreakerReset
    def __init__(self, command_id: _Optional[str] = ..., namespace: _Optional[str] = ..., issued_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., note: _Optional[str] = ..., force_open: _Optional[_Union[BreakerForceOpen, _Mapping]] = ..., force_closed: _Optional[_Union[BreakerForceClosed, _Mapping]] = ..., auto: _Optional[_Union[BreakerAuto, _Mapping]] = ..., reset_breaker: _Optional[_Union[BreakerReset, _Mapping]] = ...) -> None: ...

class BreakerForceOpen(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BreakerForceClosed(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BreakerAuto(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BreakerReset(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OutcomeClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_CLASS_UNSPECIFIED: _ClassVar[OutcomeClass]
    OUTCOME_CLASS_SUCCESS: _ClassVar[OutcomeClass]
    OUTCOME_CLASS_RETRYABLE: _ClassVar[OutcomeClass]
    OUTCOME_CLASS_PERMANENT: _ClassVar[OutcomeClass]
    OUTCOME_CLASS_EXPIRED: _ClassVar[OutcomeClass]
    OUTCOME_CLASS_DEFERRED: _ClassVar[OutcomeClass]
    OUTCOME_CLASS_REFUSED: _ClassVar[OutcomeClass]
OUTCOME_CLASS_UNSPECIFIED: OutcomeClass
OUTCOME_CLASS_SUCCESS: OutcomeClass
OUTCOME_CLASS_RETRYABLE: OutcomeClass
OUTCOME_CLASS_PERMANENT: OutcomeClass
OUTCOME_CLASS_EXPIRED: OutcomeClass
OUTCOME_CLASS_DEFERRED: OutcomeClass
OUTCOME_CLASS_REFUSED: OutcomeClass

class CallbackOutcome(_message.Message):
    __slots__ = ("event_id", "namespace", "job_id", "fire_seq", "attempt", "status_code", "latency", "error_kind", "error", "body_snippet", "probe", "scheduled_at", "started_at", "finished_at", "dispatcher_id", "will_retry", "next_attempt_at", "url", "method")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    FIRE_SEQ_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CLASS_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    LATENCY_FIELD_NUMBER: _ClassVar[int]
    ERROR_KIND_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BODY_SNIPPET_FIELD_NUMBER: _ClassVar[int]
    PROBE_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    DISPATCHER_ID_FIELD_NUMBER: _ClassVar[int]
    WILL_RETRY_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_AT_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    namespace: str
    job_id: str
    fire_seq: int
    attempt: int
    status_code: int
    latency: _duration_pb2.Duration
    error_kind: str
    error: str
    body_snippet: bytes
    probe: bool
    scheduled_at: _timestamp_pb2.Timestamp
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    dispatcher_id: str
    will_retry: bool
    next_attempt_at: _timestamp_pb2.Timestamp
    url: str
    method: str
    def __init__(self, event_id: _Optional[str] = ..., namespace: _Optional[str] = ..., job_id: _Optional[str] = ..., fire_seq: _Optional[int] = ..., attempt: _Optional[int] = ..., status_code: _Optional[int] = ..., latency: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., error_kind: _Optional[str] = ..., error: _Optional[str] = ..., body_snippet: _Optional[bytes] = ..., probe: _Optional[bool] = ..., scheduled_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., dispatcher_id: _Optional[str] = ..., will_retry: _Optional[bool] = ..., next_attempt_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., url: _Optional[str] = ..., method: _Optional[str] = ..., **kwargs) -> None: ...

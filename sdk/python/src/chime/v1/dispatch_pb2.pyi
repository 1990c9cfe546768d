import datetime

from chime.v1 import job_pb2 as _job_pb2
from chime.v1 import outcome_pb2 as _outcome_pb2
from chime.v1 import scheduler_pb2 as _scheduler_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DeadLetter(_message.Message):
    __slots__ = ("event_id", "due", "attempts", "reason", "at", "spec")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    DUE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    due: _scheduler_pb2.Due
    attempts: _containers.RepeatedCompositeFieldContainer[_outcome_pb2.CallbackOutcome]
    reason: str
    at: _timestamp_pb2.Timestamp
    spec: _job_pb2.JobSpec
    def __init__(self, event_id: _Optional[str] = ..., due: _Optional[_Union[_scheduler_pb2.Due, _Mapping]] = ..., attempts: _Optional[_Iterable[_Union[_outcome_pb2.CallbackOutcome, _Mapping]]] = ..., reason: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., spec: _Optional[_Union[_job_pb2.JobSpec, _Mapping]] = ...) -> None: ...

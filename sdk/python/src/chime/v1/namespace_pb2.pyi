import datetime

from chime.v1 import job_pb2 as _job_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RateLimit(_message.Message):
    __slots__ = ("per_second", "burst")
    PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    per_second: float
    burst: int
    def __init__(self, per_second: _Optional[float] = ..., burst: _Optional[int] = ...) -> None: ...

class BreakerConfig(_message.Message):
    __slots__ = ("window", "min_requests", "failure_rate_threshold", "slow_call_duration", "slow_call_rate_threshold", "latency_threshold", "cool_off", "max_cool_off", "half_open_probes", "trips_to_disable")
    WINDOW_FIELD_NUMBER: _ClassVar[int]
    MIN_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    FAILURE_RATE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    SLOW_CALL_DURATION_FIELD_NUMBER: _ClassVar[int]
    SLOW_CALL_RATE_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    LATENCY_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    COOL_OFF_FIELD_NUMBER: _ClassVar[int]
    MAX_COOL_OFF_FIELD_NUMBER: _ClassVar[int]
    HALF_OPEN_PROBES_FIELD_NUMBER: _ClassVar[int]
    TRIPS_TO_DISABLE_FIELD_NUMBER: _ClassVar[int]
    window: _duration_pb2.Duration
    min_requests: int
    failure_rate_threshold: float
    slow_call_duration: _duration_pb2.Duration
    slow_call_rate_threshold: float
    latency_threshold: _duration_pb2.Duration
    cool_off: _duration_pb2.Duration
    max_cool_off: _duration_pb2.Duration
    half_open_probes: int
    trips_to_disable: int
    def __init__(self, window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., min_requests: _Optional[int] = ..., failure_rate_threshold: _Optional[float] = ..., slow_call_duration: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., slow_call_rate_threshold: _Optional[float] = ..., latency_threshold: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., cool_off: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_cool_off: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., half_open_probes: _Optional[int] = ..., trips_to_disable: _Optional[int] = ...) -> None: ...

class NamespaceConfig(_message.Message):
    __slots__ = ("namespace", "retry", "rate_limit", "max_concurrency", "relevancy_window", "signing_secret", "allowed_hosts", "breaker", "updated_at", "key_hashes", "version", "spread", "previous_signing_secret", "previous_signing_secret_until", "key_created")
    class KeyCreatedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _timestamp_pb2.Timestamp
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    RATE_LIMIT_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    RELEVANCY_WINDOW_FIELD_NUMBER: _ClassVar[int]
    SIGNING_SECRET_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_HOSTS_FIELD_NUMBER: _ClassVar[int]
    BREAKER_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    KEY_HASHES_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SPREAD_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_SIGNING_SECRET_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_SIGNING_SECRET_UNTIL_FIELD_NUMBER: _ClassVar[int]
    KEY_CREATED_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    retry: _job_pb2.RetryPolicy
    rate_limit: RateLimit
    max_concurrency: int
    relevancy_window: _duration_pb2.Duration
    signing_secret: str
    allowed_hosts: _containers.RepeatedScalarFieldContainer[str]
    breaker: BreakerConfig
    updated_at: _timestamp_pb2.Timestamp
    key_hashes: _containers.RepeatedScalarFieldContainer[bytes]
    version: int
    spread: int
    previous_signing_secret: str
    previous_signing_secret_until: _timestamp_pb2.Timestamp
    key_created: _containers.MessageMap[str, _timestamp_pb2.Timestamp]
    def __init__(self, namespace: _Optional[str] = ..., retry: _Optional[_Union[_job_pb2.RetryPolicy, _Mapping]] = ..., rate_limit: _Optional[_Union[RateLimit, _Mapping]] = ..., max_concurrency: _Optional[int] = ..., relevancy_window: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., signing_secret: _Optional[str] = ..., allowed_hosts: _Optional[_Iterable[str]] = ..., breaker: _Optional[_Union[BreakerConfig, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., key_hashes: _Optional[_Iterable[bytes]] = ..., version: _Optional[int] = ..., spread: _Optional[int] = ..., previous_signing_secret: _Optional[str] = ..., previous_signing_secret_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., key_created: _Optional[_Mapping[str, _timestamp_pb2.Timestamp]] = ...) -> None: ...

class NamespaceCommand(_message.Message):
    __slots__ = ("command_id", "issued_at", "namespace", "put", "add_key", "revoke_key", "rotate_signing_secret")
    COMMAND_ID_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PUT_FIELD_NUMBER: _ClassVar[int]
    ADD_KEY_FIELD_NUMBER: _ClassVar[int]
    REVOKE_KEY_FIELD_NUMBER: _ClassVar[int]
    ROTATE_SIGNING_SECRET_FIELD_NUMBER: _ClassVar[int]
    command_id: str
    issued_at: _timestamp_pb2.Timestamp
    namespace: str
    put: NamespaceConfig
    add_key: AddKey
    revoke_key: RevokeKey
    rotate_signing_secret: RotateSigningSecret
    def __init__(self, command_id: _Optional[str] = ..., issued_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., namespace: _Optional[str] = ..., put: _Optional[_Union[NamespaceConfig, _Mapping]] = ..., add_key: _Optional[_Union[AddKey, _Mapping]] = ..., revoke_key: _Optional[_Union[RevokeKey, _Mapping]] = ..., rotate_signing_secret: _Optional[_Union[RotateSigningSecret, _Mapping]] = ...) -> None: ...

class AddKey(_message.Message):
    __slots__ = ("key_hash",)
    KEY_HASH_FIELD_NUMBER: _ClassVar[int]
    key_hash: bytes
    def __init__(self, key_hash: _Optional[bytes] = ...) -> None: ...

class RevokeKey(_message.Message):
    __slots__ = ("key_hash",)
    KEY_HASH_FIELD_NUMBER: _ClassVar[int]
    key_hash: bytes
    def __init__(self, key_hash: _Optional[bytes] = ...) -> None: ...

class RotateSigningSecret(_message.Message):
    __slots__ = ("secret", "overlap")
    SECRET_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    secret: str
    overlap: _duration_pb2.Duration
    def __init__(self, secret: _Optional[str] = ..., overlap: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

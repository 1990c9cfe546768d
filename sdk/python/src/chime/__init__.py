"""chime's Python SDK.

- :mod:`chime.http`: the HTTP API (``Client``, ``AsyncClient``, ``ProblemError``).
- :mod:`chime.kafka`: publish job commands straight to Kafka (``Publisher``).
- :mod:`chime.verify`: verify the callbacks chime sends (``verify``).
- :mod:`chime.v1`: the protobuf messages; :mod:`chime.models`: the API's types.
"""

from chime.http import AsyncClient, Client, ProblemError
from chime.kafka import Publisher, PublishError, Receipt
from chime.validate import ValidationError
from chime.verify import Callback, verify

__all__ = ["AsyncClient", "Callback", "Client", "ProblemError", "PublishError", "Publisher", "Receipt",
           "ValidationError", "verify"]

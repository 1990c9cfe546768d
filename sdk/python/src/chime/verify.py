"""Verify the callbacks chime sends, with the official Standard Webhooks library.

chime signs a callback when its namespace has a signing secret
(``whsec_...``, from ``POST /v1/namespaces/{ns}/signing-secret:rotate``):
``webhook-id`` is the fire's idempotency key, ``webhook-timestamp`` the
send time, ``webhook-signature`` ``v1,<base64 HMAC-SHA256>`` for each key in
use (two during a rotation's overlap). :func:`verify` checks them, refuses a
timestamp more than five minutes off (replays), and returns what a receiver
needs to process the call exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Mapping

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

__all__ = ["Callback", "WebhookVerificationError", "verify"]

HEADER_IDEMPOTENCY_KEY = "idempotency-key"
HEADER_JOB_ID = "x-chime-job-id"
HEADER_NAMESPACE = "x-chime-namespace"
HEADER_ATTEMPT = "x-chime-attempt"
HEADER_SCHEDULED_AT = "x-chime-scheduled-at"


@dataclass(frozen=True)
class Callback:
    """A verified callback."""

    idempotency_key: str
    """The fire's key (``namespace/job/fire``): the same on every retry of a fire; process it once."""
    namespace: str
    job_id: str
    attempt: int
    scheduled_at: datetime | None
    body: bytes


def verify(secret: str | list[str], body: bytes, headers: Mapping[str, str]) -> Callback:
    """Check a callback's signature against the namespace's secret (or any of several).

    Raises :class:`WebhookVerificationError` when no secret verifies it, or
    when its timestamp is too old or too new.
    """
    h = {k.lower(): v for k, v in headers.items()}
    secrets = [secret] if isinstance(secret, str) else list(secret)
    last: Exception = WebhookVerificationError("no signing secret given")
    for s in secrets:
        try:
            Webhook(s).verify(body, h, json_parse=False)
            break
        except WebhookVerificationError as e:
            last = e
    else:
        raise last
    scheduled = h.get(HEADER_SCHEDULED_AT)
    return Callback(
        idempotency_key=h.get(HEADER_IDEMPOTENCY_KEY, h.get("webhook-id", "")),
        namespace=h.get(HEADER_NAMESPACE, ""),
        job_id=h.get(HEADER_JOB_ID, ""),
        attempt=int(h.get(HEADER_ATTEMPT, "1") or 1),
        scheduled_at=datetime.fromisoformat(scheduled.replace("Z", "+00:00")).astimezone(timezone.utc) if scheduled else None,
        body=body,
    )

import base64
import hashlib
import hmac
import time

import pytest

from chime.verify import WebhookVerificationError, verify

SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()


def signed(body: bytes, secret: str = SECRET, ts: int | None = None, msg_id: str = "acme/job/1"):
    ts = int(time.time()) if ts is None else ts
    key = base64.b64decode(secret.removeprefix("whsec_"))
    sig = base64.b64encode(hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest()).decode()
    return {"webhook-id": msg_id, "webhook-timestamp": str(ts), "webhook-signature": "v1," + sig,
            "Idempotency-Key": msg_id, "X-Chime-Namespace": "acme", "X-Chime-Job-Id": "job", "X-Chime-Attempt": "2",
            "X-Chime-Scheduled-At": "2026-11-29T01:00:00Z"}


def test_verify_accepts_chime_signature():
    cb = verify(SECRET, b'{"a":1}', signed(b'{"a":1}'))
    assert cb.idempotency_key == "acme/job/1"
    assert (cb.namespace, cb.job_id, cb.attempt) == ("acme", "job", 2)
    assert cb.scheduled_at.isoformat() == "2026-11-29T01:00:00+00:00"


@pytest.mark.parametrize("case", ["tampered body", "wrong secret", "old timestamp"])
def test_verify_refuses(case):
    body, headers = b'{"a":1}', signed(b'{"a":1}')
    secret = SECRET
    if case == "tampered body":
        body = b'{"a":2}'
    elif case == "wrong secret":
        secret = "whsec_" + base64.b64encode(b"another key of 32 bytes........").decode()
    else:
        headers = signed(body, ts=int(time.time()) - 3600)
    with pytest.raises(WebhookVerificationError):
        verify(secret, body, headers)


def test_verify_during_a_rotation_takes_either_secret():
    other = "whsec_" + base64.b64encode(b"another key of 32 bytes........").decode()
    verify([other, SECRET], b"x", signed(b"x"))

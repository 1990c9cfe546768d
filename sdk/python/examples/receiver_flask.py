"""A Flask receiver for chime's callbacks: checks each signature, processes each fire once.

    CHIME_SIGNING_SECRET=whsec_... flask --app examples/receiver_flask run --port 9999

chime sends a fire again when it is not sure the first call landed (a
timeout, a restart), with the same Idempotency-Key: the receiver records
the keys it has processed and answers a repeat 200 without doing the work
twice. A real service keeps the keys where its work is stored (a unique
index in its database, in the same transaction as the work).
"""

from __future__ import annotations

import os
import threading

from flask import Flask, request

from chime import verify
from chime.verify import WebhookVerificationError

app = Flask(__name__)
secret = os.environ.get("CHIME_SIGNING_SECRET", "")
done: set[str] = set()
done_lock = threading.Lock()
work: list[bytes] = []


@app.post("/hook")
def hook():
    try:
        cb = verify(secret, request.get_data(), dict(request.headers))
    except WebhookVerificationError as e:
        return {"error": f"signature: {e}"}, 401
    with done_lock:
        if cb.idempotency_key in done:
            return {"status": "already processed"}, 200
        done.add(cb.idempotency_key)
        work.append(cb.body)  # the job's work, once per fire
    return {"status": "processed", "key": cb.idempotency_key}, 200

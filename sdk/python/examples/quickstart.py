import os
from datetime import datetime, timedelta, timezone

from chime import Client, Publisher
from chime.commands import http_job

hook = os.environ.get("CHIME_HOOK", "http://127.0.0.1:9999/hook")  # `bin/chime echo` listens there
api = Client(os.environ.get("CHIME_URL", "http://127.0.0.1:8080"), os.environ["CHIME_TOKEN"])
api.put_namespace("acme")
api.create_job("acme", {"id": "hello-http", "schedule": {"in": "2s"}, "callback": {"url": hook, "body": {"hello": "chime"}}})

# The same, straight into Kafka (chime dev's embedded broker; its address
# and credential are in its state dir).
with Publisher.from_state_dir(os.environ.get("CHIME_STATE_DIR", ".chime")) as kafka:
    at = datetime.now(timezone.utc) + timedelta(seconds=2)
    receipt = kafka.schedule(http_job("acme", "hello-kafka", hook, at=at, body=b'{"hello": "kafka"}')).result()
    print("published", receipt)
print(api.get_job("acme", "hello-http")["state"])

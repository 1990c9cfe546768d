"""The SDK against a whole chime dev: HTTP and Kafka, callbacks verified, controls, dead letters, errors."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from conftest import wait_for

from chime import AsyncClient, Client, ProblemError, Publisher, ValidationError, verify
from chime.commands import http_job
from chime.partition import job_key, partition_of

NS = "pysdk"


def soon(seconds: float = 1.0) -> datetime:
    return datetime.now(timezone.utc) + timedelta(seconds=seconds)


def iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


@pytest.fixture(scope="module")
def setup(chime_dev, receiver):
    admin = Client(chime_dev.base_url, chime_dev.admin_token)
    admin.put_namespace(NS, {"retry": {"max_attempts": 1}})
    key = admin.create_key(NS)
    secret = admin.rotate_signing_secret(NS)["signing_secret"]
    client = Client(chime_dev.base_url, key["key"])
    publisher = Publisher.from_state_dir(chime_dev.state_dir)
    yield admin, client, publisher, secret
    publisher.close()
    client.close()
    admin.close()


def state_of(client: Client, job_id: str) -> str:
    return client.get_job(NS, job_id).get("state", "")


def test_schedule_over_http_and_kafka_and_verify_callbacks(setup, receiver):
    _, client, publisher, secret = setup
    # Over HTTP, with an idempotency key: the retry answers as the first did.
    req = {"id": "http-1", "schedule": {"at": iso(soon())}, "callback": {"url": receiver.url + "/http-1", "body": {"via": "http"}},
           "labels": {"team": "billing"}}
    idem = str(uuid.uuid4())
    first = client.create_job(NS, req, idempotency_key=idem)
    again = client.create_job(NS, req, idempotency_key=idem)
    assert first == again

    # Through Kafka: the record lands where goka reads the key.
    spec = http_job(NS, "kafka-1", receiver.url + "/kafka-1", at=soon(), body=b'{"via":"kafka"}',
                    headers={"Content-Type": "application/json"}, labels={"team": "billing"})
    receipt = publisher.schedule(spec).result(timeout=30)
    assert receipt.partition == partition_of(job_key(NS, "kafka-1"), publisher.partitions())
    assert receipt.offset >= 0

    for job_id, body in (("http-1", {"via": "http"}), ("kafka-1", {"via": "kafka"})):
        calls = wait_for(f"{job_id}'s callback", lambda: receiver.calls_to("/" + job_id), timeout=60)
        cb = verify(secret, calls[0].body, calls[0].headers)
        assert cb.idempotency_key == f"{NS}/{job_id}/1"
        assert (cb.namespace, cb.job_id) == (NS, job_id)
        assert json.loads(cb.body) == body

    # A job published from Python reads as one created over HTTP does.
    wait_for("both completed", lambda: state_of(client, "http-1") == state_of(client, "kafka-1") == "completed")
    h, k = client.get_job(NS, "http-1"), client.get_job(NS, "kafka-1")
    assert set(h) == set(k)
    assert k["labels"] == {"team": "billing"} and k["fires"] == 1
    assert {j["id"] for j in client.list_jobs(NS, limit=1)} >= {"http-1", "kafka-1"}, "the listing pages through every job"
    billing = {j["id"] for j in client.list_jobs(NS, labels={"team": "billing"}, limit=1)}
    assert {"http-1", "kafka-1"} <= billing, "found by label, over both ways in"
    assert all(client.get_job(NS, i).get("labels", {}).get("team") == "billing" for i in billing)
    assert not list(client.list_jobs(NS, labels={"team": "billing", "tier": "none"})), "every label must match"


def test_controls_over_http_and_kafka(setup, receiver):
    _, client, publisher, secret = setup
    for job_id in ("ctl-http", "ctl-kafka"):
        client.create_job(NS, {"id": job_id, "schedule": {"every": "1h"}, "callback": {"url": receiver.url + "/" + job_id}})
    # Over HTTP.
    assert client.pause_job(NS, "ctl-http")["state"] == "paused"
    assert client.resume_job(NS, "ctl-http")["state"] == "scheduled"
    client.trigger_job(NS, "ctl-http")
    wait_for("the triggered fire", lambda: receiver.calls_to("/ctl-http"))
    assert client.cancel_job(NS, "ctl-http")["state"] == "cancelled"
    # Through Kafka.
    publisher.pause(NS, "ctl-kafka").result(timeout=30)
    wait_for("paused through Kafka", lambda: state_of(client, "ctl-kafka") == "paused")
    publisher.resume(NS, "ctl-kafka").result(timeout=30)
    wait_for("resumed through Kafka", lambda: state_of(client, "ctl-kafka") == "scheduled")
    publisher.trigger(NS, "ctl-kafka").result(timeout=30)
    calls = wait_for("the fire triggered through Kafka", lambda: receiver.calls_to("/ctl-kafka"))
    verify(secret, calls[0].body, calls[0].headers)
    publisher.cancel(NS, "ctl-kafka", "done").result(timeout=30)
    wait_for("cancelled through Kafka", lambda: state_of(client, "ctl-kafka") == "cancelled")


def test_dead_letter_replay(setup, receiver):
    _, client, _, _ = setup
    receiver.status["/dead-1"] = 500
    client.create_job(NS, {"id": "dead-1", "schedule": {"at": iso(soon())}, "callback": {"url": receiver.url + "/dead-1"},
                           "retry": {"max_attempts": 1}})
    dl = wait_for("the dead letter", lambda: [d for d in client.list_dead_letters(NS, job_id_prefix="dead-1")], timeout=90)
    receiver.status["/dead-1"] = 200
    before = len(receiver.calls_to("/dead-1"))
    replay = client.replay_dead_letter(NS, dl[0]["id"])
    assert replay["id"]
    wait_for("the replayed call", lambda: len(receiver.calls_to("/dead-1")) > before, timeout=60)


def test_problem_json_is_a_typed_exception(setup):
    _, client, _, _ = setup
    with pytest.raises(ProblemError) as e:
        client.create_job(NS, {"id": "bad/id", "schedule": {"every": "1h"}, "callback": {"url": "ftp://x"}})
    p = e.value
    assert 400 <= p.status < 500
    assert p.type and p.title
    assert p.errors and all("field" in x for x in p.errors)
    with pytest.raises(ProblemError) as e:
        client.get_job(NS, "no-such-job")
    assert e.value.status == 404


def test_publisher_refuses_invalid_commands_before_kafka(setup):
    _, _, publisher, _ = setup
    with pytest.raises(ValidationError) as e:
        publisher.schedule(http_job(NS, "bad", "ftp://example.com/x", at=soon()))
    assert e.value.field == "upsert.spec.target.http.url"


def test_async_client(chime_dev, setup):
    async def run():
        async with AsyncClient(chime_dev.base_url, chime_dev.admin_token) as c:
            ns = await c.get_namespace(NS)
            assert ns["namespace"] == NS
            ids = [j["id"] async for j in c.list_jobs(NS, limit=2)]
            assert "http-1" in ids
            with pytest.raises(ProblemError):
                await c.get_job(NS, "no-such-job")
    asyncio.run(run())


def test_schedule_many_publishes_nothing_when_one_is_invalid(setup, receiver):
    _, client, publisher, _ = setup
    good = http_job(NS, "many-1", receiver.url + "/many", every_s=3600)
    bad = http_job(NS, "many-2", "ftp://example.com/x", every_s=3600)
    with pytest.raises(ValidationError) as e:
        publisher.schedule_many([good, bad])
    assert e.value.field == "specs[1].upsert.spec.target.http.url"
    futures = publisher.schedule_many([good, http_job(NS, "many-3", receiver.url + "/many", every_s=3600)])
    assert len({f.result(timeout=30).command_id for f in futures}) == 2
    wait_for("both scheduled", lambda: state_of(client, "many-3") == "scheduled")
    with pytest.raises(ProblemError):
        client.get_job(NS, "many-2")


def test_preview_matches_the_job(setup):
    _, client, _, _ = setup
    sched = {"every": "1h", "jitter": "5m"}
    preview = client.preview_schedule(sched, count=3, namespace=NS, job_id="preview-1")["fires"]
    assert [f["fire_seq"] for f in preview] == [1, 2, 3]
    client.create_job(NS, {"id": "preview-1", "schedule": sched, "callback": {"url": "http://127.0.0.1:9/x"}})
    job = wait_for("the job's row", lambda: (j := client.get_job(NS, "preview-1")).get("next_fires") and j)
    # Created a moment after the preview: the same jitter, an hour from creation.
    assert [f["fire_seq"] for f in job["next_fires"][:3]] == [1, 2, 3]
    with pytest.raises(ProblemError) as e:
        client.preview_schedule({"every": "1h", "jitter": "5m"})
    assert e.value.status == 422 and e.value.errors[0]["field"] == "id"


def test_schedule_policies_end_to_end(setup, receiver):
    """Through the API on chime dev: overlap skip while a slow call is open, max_fires, pause on failure."""
    _, client, _, _ = setup
    # Every second, each call taking 2.5 s: with skip, occurrences due
    # while the call is open are skipped; max_fires ends it after 2 fires.
    receiver.delay["/slow"] = 2.5
    client.create_job(NS, {"id": "slow", "schedule": {"every": "1s"}, "callback": {"url": receiver.url + "/slow", "timeout": "10s"},
                           "overlap": "skip", "max_fires": 2})
    job = wait_for("two fires, then the end", lambda: (j := client.get_job(NS, "slow"))["state"] == "completed" and j, timeout=60)
    assert job["fires"] == 2 and job["skipped"] >= 2, job
    assert job["overlap"] == "skip" and job["max_fires"] == 2
    assert len(receiver.calls_to("/slow")) == 2, "no call while one was open"
    # A fire that dead-letters pauses the job.
    receiver.status["/fails"] = 500
    client.create_job(NS, {"id": "fails", "schedule": {"every": "2s"}, "callback": {"url": receiver.url + "/fails"},
                           "retry": {"max_attempts": 1}, "pause_on_failure": True})
    job = wait_for("paused on failure", lambda: (j := client.get_job(NS, "fails"))["state"] == "paused" and j, timeout=60)
    assert "paused on failure" in job["last_outcome"]["detail"]


def test_backfill_end_to_end(setup, receiver, chime_dev):
    """Through the API on chime dev: a backfill of three past hours makes three calls, each its own fire."""
    _, client, _, secret = setup
    client.create_job(NS, {"id": "hourly", "schedule": {"cron": "0 * * * *"}, "callback": {"url": receiver.url + "/hourly"}})
    wait_for("the job's row", lambda: client.get_job(NS, "hourly").get("next_fires"))
    now = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
    ans = client.backfill_job(NS, "hourly", iso(now - timedelta(hours=3)), iso(now))
    assert ans["count"] == 3
    calls = wait_for("three backfilled calls", lambda: len(receiver.calls_to("/hourly")) >= 3 and receiver.calls_to("/hourly"))
    keys = {verify(secret, c.body, c.headers).idempotency_key for c in calls}
    assert len(keys) == 3
    with pytest.raises(ProblemError) as e:
        client.backfill_job(NS, "hourly", iso(now - timedelta(days=30)), iso(now))
    assert e.value.status == 422 and e.value.errors[0]["field"] == "to"

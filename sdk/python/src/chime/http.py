"""A typed client for chime's HTTP API (api/openapi.json), sync and async, on httpx.

Every route has a method; answers are the TypedDicts of :mod:`chime.models`,
generated from the OpenAPI document. An error answer (RFC 9457
problem+json) raises :class:`ProblemError` with its ``type``, ``title``,
``detail``, ``errors[]`` (the fields at fault) and ``Retry-After``. Cursor
listings are iterators that fetch the next page as they go. Creates take
an ``idempotency_key``: the same key and body answer as the first request
did, so a retry after a lost answer creates nothing twice.

The token is the administrator's (``<state dir>/admin-token`` of ``chime
dev``) or a namespace key's (``create_key``).
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Iterator, Mapping, cast
from urllib.parse import quote

import httpx

from chime import models

DEFAULT_BASE_URL = "http://127.0.0.1:8080"


class ProblemError(Exception):
    """An RFC 9457 problem answer from chime's API."""

    def __init__(self, status: int, problem: dict[str, Any], retry_after: float | None):
        self.status = status
        self.type: str = problem.get("type", "about:blank")
        self.title: str = problem.get("title", "")
        self.detail: str = problem.get("detail", "")
        self.instance: str = problem.get("instance", "")
        self.errors: list[models.Error] = problem.get("errors", []) or []
        self.retry_after = retry_after
        self.problem = problem
        fields = "; ".join(f"{e.get('field', '')}: {e.get('reason', '')}" for e in self.errors)
        super().__init__(f"{status} {self.title}: {self.detail}" + (f" ({fields})" if fields else ""))


def _retry_after(resp: httpx.Response) -> float | None:
    v = resp.headers.get("retry-after")
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def _answer(resp: httpx.Response) -> Any:
    if resp.status_code >= 400:
        try:
            problem = resp.json()
            if not isinstance(problem, dict):
                raise ValueError
        except ValueError:
            problem = {"title": resp.reason_phrase, "detail": resp.text[:500]}
        raise ProblemError(resp.status_code, problem, _retry_after(resp))
    if resp.status_code == 204 or not resp.content:
        return None
    return resp.json()


def _seg(s: str) -> str:
    return quote(s, safe="")


class _Routes:
    """Every route once; ``_call`` runs it (a result for Client, an awaitable for AsyncClient)."""

    def _call(self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None,
              idempotency_key: str | None = None) -> Any:
        raise NotImplementedError

    # Namespaces (admin token).
    def put_namespace(self, ns: str, config: models.NamespaceConfig | None = None) -> models.Namespace:
        return self._call("PUT", f"/v1/namespaces/{_seg(ns)}", json=config or {})

    def get_namespace(self, ns: str) -> models.Namespace:
        return self._call("GET", f"/v1/namespaces/{_seg(ns)}")

    def list_namespaces_page(self, *, limit: int | None = None, cursor: str | None = None) -> models.NamespaceList:
        return self._call("GET", "/v1/namespaces", params={"limit": limit, "cursor": cursor})

    def create_key(self, ns: str) -> models.Key:
        return self._call("POST", f"/v1/namespaces/{_seg(ns)}/keys")

    def list_keys(self, ns: str) -> models.KeyList:
        return self._call("GET", f"/v1/namespaces/{_seg(ns)}/keys")

    def revoke_key(self, ns: str, key_id: str) -> None:
        return self._call("DELETE", f"/v1/namespaces/{_seg(ns)}/keys/{_seg(key_id)}")

    def rotate_signing_secret(self, ns: str, rotate: models.Rotate | None = None) -> models.SigningSecret:
        return self._call("POST", f"/v1/namespaces/{_seg(ns)}/signing-secret:rotate", json=rotate or {})

    # Schedules (any token).
    def preview_schedule(self, schedule: models.Schedule, *, count: int | None = None, namespace: str | None = None,
                         job_id: str | None = None, from_: str | None = None) -> models.Preview:
        """The next fires of a schedule, creating nothing (namespace and job_id are needed when it has jitter)."""
        body: dict[str, Any] = {"schedule": schedule}
        for k, v in (("count", count), ("namespace", namespace), ("id", job_id), ("from", from_)):
            if v is not None:
                body[k] = v
        return self._call("POST", "/v1/schedules:preview", json=body)

    # Jobs.
    def create_job(self, ns: str, job: models.JobRequest, *, idempotency_key: str | None = None) -> models.JobCreated:
        return self._call("POST", f"/v1/namespaces/{_seg(ns)}/jobs", json=job, idempotency_key=idempotency_key)

    def create_jobs(self, ns: str, jobs: list[models.JobRequest], *, idempotency_key: str | None = None) -> models.BatchCreated:
        return self._call("POST", f"/v1/namespaces/{_seg(ns)}/jobs:batch", json={"jobs": jobs}, idempotency_key=idempotency_key)

    def get_job(self, ns: str, job_id: str) -> models.Job:
        return self._call("GET", f"/v1/namespaces/{_seg(ns)}/jobs/{_seg(job_id)}")

    def list_jobs_page(self, ns: str, *, state: str | None = None, labels: Mapping[str, str] | None = None,
                       limit: int | None = None, cursor: str | None = None) -> models.JobList:
        """A page of ns's jobs, newest first; only those in state, and with every one of labels, if given."""
        return self._call("GET", f"/v1/namespaces/{_seg(ns)}/jobs",
                          params={"state": state, "label": _labels(labels), "limit": limit, "cursor": cursor})

    def cancel_job(self, ns: str, job_id: str) -> models.Job:
        return self._call("DELETE", f"/v1/namespaces/{_seg(ns)}/jobs/{_seg(job_id)}")

    def pause_job(self, ns: str, job_id: str) -> models.Job:
        return self._call("POST", f"/v1/namespaces/{_seg(ns)}/jobs/{_seg(job_id)}/pause")

    def resume_job(self, ns: str, job_id: str) -> models.Job:
        return self._call("POST", f"/v1/namespaces/{_seg(ns)}/jobs/{_seg(job_id)}/resume")

    def trigger_job(self, ns: str, job_id: str) -> dict[str, str]:
        return self._call("POST", f"/v1/namespaces/{_seg(ns)}/jobs/{_seg(job_id)}/trigger")

    def backfill_job(self, ns: str, job_id: str, from_: str, to: str) -> models.Backfill:
        """Fire now the occurrences of the job's schedule in [from_, to) (RFC 3339, in the past; at most 100)."""
        return self._call("POST", f"/v1/namespaces/{_seg(ns)}/jobs/{_seg(job_id)}/backfill", json={"from": from_, "to": to})

    def get_attempts_page(self, ns: str, job_id: str, *, limit: int | None = None, cursor: str | None = None,
                          outcome_class: str | None = None) -> models.Attempts:
        return self._call("GET", f"/v1/namespaces/{_seg(ns)}/jobs/{_seg(job_id)}/attempts",
                          params={"limit": limit, "cursor": cursor, "class": outcome_class})

    # Breaker and stats.
    def get_breaker(self, ns: str) -> models.Breaker:
        return self._call("GET", f"/v1/namespaces/{_seg(ns)}/breaker")

    def put_breaker(self, ns: str, mode: models.BreakerMode) -> models.BreakerAccepted:
        return self._call("PUT", f"/v1/namespaces/{_seg(ns)}/breaker", json=mode)

    def reset_breaker(self, ns: str, reset: models.BreakerReset | None = None) -> models.BreakerAccepted:
        return self._call("POST", f"/v1/namespaces/{_seg(ns)}/breaker/reset", json=reset or {})

    def get_breaker_history(self, ns: str, *, from_: str | None = None, to: str | None = None) -> models.BreakerHistory:
        return self._call("GET", f"/v1/namespaces/{_seg(ns)}/breaker/history", params={"from": from_, "to": to})

    def get_stats(self, ns: str, *, from_: str | None = None, to: str | None = None, step: str | None = None) -> models.Stats:
        return self._call("GET", f"/v1/namespaces/{_seg(ns)}/stats", params={"from": from_, "to": to, "step": step})

    # Dead letters.
    def list_dead_letters_page(self, ns: str, *, limit: int | None = None, before: str | None = None,
                               job_id_prefix: str | None = None, replayed: bool | None = None) -> models.DeadLetters:
        params = {"limit": limit, "before": before, "job_id_prefix": job_id_prefix,
                  "replayed": None if replayed is None else str(replayed).lower()}
        return self._call("GET", f"/v1/namespaces/{_seg(ns)}/dead-letters", params=params)

    def replay_dead_letter(self, ns: str, dead_letter_id: str) -> models.Replay:
        return self._call("POST", f"/v1/namespaces/{_seg(ns)}/dead-letters/{_seg(dead_letter_id)}/replay")

    def replay_dead_letters(self, ns: str, request: models.BulkReplayRequest) -> models.BulkReplay:
        return self._call("POST", f"/v1/namespaces/{_seg(ns)}/dead-letters:replay", json=request)


def _labels(labels: Mapping[str, str] | None) -> list[str] | None:
    """labels as the API's repeated label=key:value."""
    return [f"{k}:{v}" for k, v in sorted(labels.items())] if labels else None


def _clean(params: dict[str, Any] | None) -> dict[str, Any] | None:
    return {k: v for k, v in params.items() if v is not None} if params else None


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class Client(_Routes):
    """chime's API, synchronously. Use as a context manager, or call close()."""

    def __init__(self, base_url: str = DEFAULT_BASE_URL, token: str | None = None, *, timeout: float = 10.0,
                 transport: httpx.BaseTransport | None = None):
        self._http = httpx.Client(base_url=base_url, headers=_headers(token), timeout=timeout, transport=transport)

    def _call(self, method, path, *, json=None, params=None, idempotency_key=None):
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return _answer(self._http.request(method, path, json=json, params=_clean(params), headers=headers))

    def list_namespaces(self, *, limit: int | None = None) -> Iterator[models.Namespace]:
        cursor = None
        while True:
            page = self.list_namespaces_page(limit=limit, cursor=cursor)
            yield from page.get("namespaces", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def list_jobs(self, ns: str, *, state: str | None = None, labels: Mapping[str, str] | None = None,
                  limit: int | None = None) -> Iterator[models.Job]:
        """Every job of ns (in a state, with every one of labels, if given), page after page."""
        cursor = None
        while True:
            page = self.list_jobs_page(ns, state=state, labels=labels, limit=limit, cursor=cursor)
            yield from page["jobs"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def list_dead_letters(self, ns: str, *, limit: int | None = None, job_id_prefix: str | None = None,
                          replayed: bool | None = None) -> Iterator[models.DeadLetter]:
        before = None
        while True:
            page = self.list_dead_letters_page(ns, limit=limit, before=before, job_id_prefix=job_id_prefix, replayed=replayed)
            yield from page["dead_letters"]
            before = page.get("next_before")
            if not before:
                return

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncClient(_Routes):
    """chime's API for asyncio: the same methods as :class:`Client`, awaited."""

    def __init__(self, base_url: str = DEFAULT_BASE_URL, token: str | None = None, *, timeout: float = 10.0,
                 transport: httpx.AsyncBaseTransport | None = None):
        self._http = httpx.AsyncClient(base_url=base_url, headers=_headers(token), timeout=timeout, transport=transport)

    async def _call(self, method, path, *, json=None, params=None, idempotency_key=None):
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return _answer(await self._http.request(method, path, json=json, params=_clean(params), headers=headers))

    async def list_jobs(self, ns: str, *, state: str | None = None, labels: Mapping[str, str] | None = None,
                        limit: int | None = None) -> AsyncIterator[models.Job]:
        cursor = None
        while True:
            page = cast(models.JobList, await self.list_jobs_page(ns, state=state, labels=labels, limit=limit, cursor=cursor))
            for job in page["jobs"]:
                yield job
            cursor = page.get("next_cursor")
            if not cursor:
                return

    async def list_dead_letters(self, ns: str, *, limit: int | None = None, job_id_prefix: str | None = None,
                                replayed: bool | None = None) -> AsyncIterator[models.DeadLetter]:
        before = None
        while True:
            page = cast(models.DeadLetters, await self.list_dead_letters_page(
                ns, limit=limit, before=before, job_id_prefix=job_id_prefix, replayed=replayed))
            for d in page["dead_letters"]:
                yield d
            before = page.get("next_before")
            if not before:
                return

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

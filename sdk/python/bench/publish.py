"""Publishing benchmark: one Python process schedules N jobs through chime.kafka.Publisher.

    make bench-sdk            # or: CHIME_BIN=bin/chime python sdk/python/bench/publish.py 100000

It starts a chime dev (embedded broker, fresh state dir), creates a
namespace, then publishes N one-shot jobs due in an hour from one thread
(every future kept), waits for Kafka's acknowledgement of all, and prints
schedules/s from the first publish to the last acknowledgement. It then
reads the namespace's jobs back over HTTP until all N are there: an
acknowledged command is never lost.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import ChimeDev, free_port, wait_for  # noqa: E402

import secrets  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402

import httpx  # noqa: E402

from chime import Client, Publisher  # noqa: E402
from chime.commands import http_job  # noqa: E402


def start_dev(binary: str) -> ChimeDev:
    state = Path(tempfile.mkdtemp(prefix="chime-sdk-bench-"))
    port, token = free_port(), secrets.token_hex(16)
    env = {**os.environ, "CHIME_ADMIN_TOKEN": token, "CHIME_LOG_LEVEL": "warn", "CHIME_QUOTA_PENDING": "-1"}
    proc = subprocess.Popen([binary, "dev", "-state-dir", str(state), "-addr", f"127.0.0.1:{port}"], env=env,
                            stdout=open(state / "chime.log", "wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    wait_for("chime dev ready", lambda: httpx.get(base + "/readyz", timeout=2).status_code == 200, timeout=180)
    return ChimeDev(state, base, token, proc)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    dev = start_dev(os.environ.get("CHIME_BIN", "bin/chime"))
    try:
        admin = Client(dev.base_url, dev.admin_token, timeout=60)
        admin.put_namespace("bench", {})
        at = datetime.now(timezone.utc) + timedelta(hours=1)
        specs = [http_job("bench", f"job-{i}", "http://127.0.0.1:9/hook", at=at, body=b'{"i":%d}' % i) for i in range(n)]
        with Publisher.from_state_dir(dev.state_dir) as pub:
            pub.partitions()  # metadata, outside the timing
            t0 = time.perf_counter()
            futures = [pub.schedule(s) for s in specs]
            pub.flush(120)
            elapsed = time.perf_counter() - t0
            failed = sum(1 for f in futures if f.exception() is not None)
        print(f"python publisher: {n} schedules in {elapsed:.2f} s: {n / elapsed:,.0f} schedules/s from one process; {failed} failed")
        seen = wait_for("every acknowledged job readable over HTTP",
                        lambda: (c := sum(1 for _ in admin.list_jobs("bench", limit=500))) >= n - failed and c, timeout=300, every=2)
        print(f"python publisher: {seen} of {n} jobs in chime (lost: {n - failed - seen})")
    finally:
        dev.proc.terminate()
        dev.proc.wait(30)
        shutil.rmtree(dev.state_dir, ignore_errors=True)


if __name__ == "__main__":
    main()

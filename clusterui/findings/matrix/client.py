"""A running ClusterUI, seen from outside: batches go in over its broker, as a collector
sends them (signed with each node's derived key), and jobs and findings come back through
its JSON API with a token. Nothing here touches the server's database."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from collectors import signing
from collectors.transport import RedisSender


class ServerError(Exception):
    pass


@dataclass
class Server:
    url: str  # the server's root, e.g. http://127.0.0.1:8000
    token: str
    broker_url: str
    key_id: str
    cluster_secret: str
    stale_after_s: float = 300.0  # the server's JOB_STALE_AFTER_S
    poll_s: float = 1.0
    settle_s: float = 10.0  # unchanged this long: settled (beat's detector interval is shorter)
    account: str = ""  # the run's jobs' account

    def __post_init__(self) -> None:
        self._sender = RedisSender(self.broker_url,
                                   signing_key=signing.node_signer(self.key_id,
                                                                   self.cluster_secret))
        self.sent = 0

    # -- in ----------------------------------------------------------------------------

    def send(self, batches: list[dict]) -> None:
        for batch in batches:
            self._sender.send(batch)
        self.sent += len(batches)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def close(self) -> None:
        self._sender.close()

    # -- out ---------------------------------------------------------------------------

    def get(self, path: str, **params) -> dict:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        request = urllib.request.Request(
            f"{self.url.rstrip('/')}/api/v1/{path}?{query}",
            headers={"Authorization": f"Token {self.token}", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return json.load(answer)
        except urllib.error.HTTPError as e:
            raise ServerError(f"GET {request.full_url}: HTTP {e.code}: "
                              f"{e.read()[:300].decode(errors='replace')}") from None
        except urllib.error.URLError as e:
            raise ServerError(f"GET {request.full_url}: {e.reason}") from None

    def _all(self, path: str, **params) -> list[dict]:
        rows, offset = [], 0
        while True:
            page = self.get(path, limit=1000, offset=offset, **params)
            rows += page["results"]
            offset += len(page["results"])
            if not page.get("next") or not page["results"]:
                return rows

    def jobs(self, account: str) -> list[dict]:
        return self._all("jobs/", account=account)

    def findings(self, account: str) -> list[dict]:
        return self._all("findings/", account=account)

    def node_findings(self, prefix: str) -> list[dict]:
        """Findings on nodes with no job (GPU errors no job held, a GPU's health, a fabric
        link) whose node name starts with ``prefix``."""
        return [f for kind in ("gpu_errors", "gpu_health", "fabric_link")
                for f in self._all("findings/", kind=kind)
                if f["job"] is None and (f["node"] or "").startswith(prefix)]

    def wait_ended(self, external_ids: list[str], account: str | None = None,
                   timeout: float | None = None) -> None:
        """Until the server shows these jobs ended (by its own silence rule)."""
        if not external_ids:
            return
        want = set(external_ids)
        limit = timeout if timeout is not None else self.stale_after_s + 180
        deadline = time.monotonic() + limit
        while True:
            jobs = {j["external_id"]: j for j in self.jobs(account or self.account)}
            left = [x for x in want if jobs.get(x, {}).get("state") != "ended"]
            if not left:
                return
            if time.monotonic() > deadline:
                raise ServerError(f"{len(left)} jobs not ended after {limit:.0f} s "
                                  f"(e.g. {sorted(left)[:3]}): is the server's beat running?")
            time.sleep(self.poll_s)

    def pending(self) -> int:
        """Batches sent that the server has not stored yet: waiting on the broker's queue
        or taken by a consumer and not committed."""
        from clusterui.ingest.queue import ReliableQueue

        queue = ReliableQueue(self._sender._redis, self._sender.queue,
                              consumer_id="scenario-report")
        return int(self._sender._redis.llen(self._sender.queue)) + queue.inflight()

    def wait_settled(self, count: int, timeout: float) -> list[dict]:
        """Until every batch sent is stored, all ``count`` jobs of the account are ended
        and finalized by a pass, and neither their findings nor their finalization have
        changed for ``settle_s`` (longer than a detector pass's interval: a pass that takes
        late samples finalizes their job again); the jobs."""
        deadline = time.monotonic() + timeout
        last, since = None, None
        while True:
            jobs = self.jobs(self.account)
            done = (len(jobs) == count and self.pending() == 0
                    and all(j["state"] == "ended" and j["finalized_at"] for j in jobs))
            if done:
                seen = (sorted((f["id"], f["state"], f["last_seen"])
                               for f in self.findings(self.account)),
                        sorted((j["id"], j["finalized_at"], j["judged_at"]) for j in jobs))
                if seen != last:
                    last, since = seen, time.monotonic()
                elif time.monotonic() - since >= self.settle_s:
                    return jobs
            else:
                last = since = None
            if time.monotonic() > deadline:
                waiting = [j["external_id"] for j in jobs
                           if j["state"] != "ended" or not j["finalized_at"]]
                raise ServerError(
                    f"after {timeout:.0f} s: {len(jobs)} of {count} jobs known, "
                    f"{len(waiting)} not ended and finalized (e.g. {waiting[:3]}), "
                    f"{self.pending()} batches not stored yet")
            time.sleep(self.poll_s)

"""A small client of the JSON API (``/api/v1/``, docs/api.md) over urllib: token auth, the
``{"error": ...}`` answers turned into exceptions a command can map to exit codes."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

TIMEOUT_S = 30.0


class ApiError(Exception):
    """The server answered with an error: ``status`` is its HTTP status, the message its
    ``error`` text."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Unreachable(Exception):
    """No answer from the server (refused, timed out, DNS, TLS)."""


class Client:
    def __init__(self, url: str, token: str, *, timeout: float = TIMEOUT_S):
        self.base = url.rstrip("/") + "/api/v1/"
        self.token = token
        self.timeout = timeout

    def get(self, path: str, params: dict | None = None) -> dict:
        url = urllib.parse.urljoin(self.base, path.lstrip("/"))
        if params:
            url += "?" + urllib.parse.urlencode(params)
        request = urllib.request.Request(url, headers={
            "Authorization": f"Token {self.token}", "Accept": "application/json",
            "User-Agent": "clusterui-jobstats"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            raise ApiError(exc.code, _error_text(exc)) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Unreachable(f"{self.base}: {reason}") from None
        try:
            return json.loads(body)
        except ValueError:
            raise ApiError(200, f"{url}: the answer is not JSON (is this a ClusterUI "
                                "server?)") from None


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read())
        return str(body["error"])
    except (ValueError, KeyError, TypeError, OSError):
        return f"HTTP {exc.code} {exc.reason}"

"""``GET /metrics`` for Prometheus: served to a request that carries ``METRICS_TOKEN`` as a
bearer token or comes from ``METRICS_ALLOWED_NETWORKS`` (the client's address as the
sign-in limits read it, behind ``LOGIN_TRUSTED_PROXIES``); with neither set, to nobody."""

import hmac
import ipaddress

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from clusterui.accounts.client_address import client_address
from clusterui.prometheus.series import ClusterCollector


def _refused(status: int, text: str) -> HttpResponse:
    response = HttpResponse(text + "\n", status=status, content_type="text/plain")
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="clusterui metrics"'
    return response


def _bearer(request) -> str | None:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


@login_not_required
@require_GET
def metrics(request):
    token, networks = settings.METRICS_TOKEN, settings.METRICS_ALLOWED_NETWORKS
    if not token and not networks:
        return _refused(403, "metrics: not enabled; set METRICS_TOKEN or "
                             "METRICS_ALLOWED_NETWORKS (docs/operations.md)")
    try:
        address = ipaddress.ip_address(client_address(request))
    except ValueError:
        address = None
    allowed = address is not None and any(address in net for net in networks)
    if not allowed:
        given = _bearer(request)
        if not token:
            return _refused(403, "metrics: this address is not in METRICS_ALLOWED_NETWORKS")
        if given is None or not hmac.compare_digest(given.encode(), token.encode()):
            return _refused(401, "metrics: a valid bearer token is required")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector())
    # The format the scraper asks for (Prometheus: OpenMetrics or text), as the library's own
    # exporters choose it.
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    return HttpResponse(encode(registry), content_type=content_type)

"""/api/v1/: the routes. Anything else under it is a JSON 404 (``errors.not_found``), and a
path given without its trailing slash is served as if it had one."""

from django.contrib.auth.decorators import login_required
from django.urls import path, re_path
from drf_spectacular.views import SpectacularSwaggerView
from rest_framework.routers import SimpleRouter

from clusterui.api.errors import not_found
from clusterui.api.schema_view import SchemaView
from clusterui.api.views.findings import FindingViewSet
from clusterui.api.views.inventory import GpuViewSet, NicViewSet, NodeViewSet
from clusterui.api.views.jobs import JobViewSet
from clusterui.api.views.root import RootView
from clusterui.api.views.tokens import TokenViewSet
from clusterui.api.views.usage import UsageView

app_name = "api"

router = SimpleRouter()
router.register("nodes", NodeViewSet, basename="nodes")
router.register("gpus", GpuViewSet, basename="gpus")
router.register("nics", NicViewSet, basename="nics")
router.register("jobs", JobViewSet, basename="jobs")
router.register("findings", FindingViewSet, basename="findings")
router.register("tokens", TokenViewSet, basename="tokens")

urlpatterns = [
    path("", RootView.as_view(), name="root"),
    path("usage/", UsageView.as_view(), name="usage"),
    path("schema/", SchemaView.as_view(), name="schema"),
    # Browsable docs (Swagger UI from the sidecar package, no CDN): a browser that is not
    # signed in goes to the login page.
    path("docs/", login_required(SpectacularSwaggerView.as_view(url_name="api:schema")),
         name="docs"),
    *router.urls,
    re_path(r"^(?P<path>[\s\S]*)$", not_found),  # any character, newlines too
]

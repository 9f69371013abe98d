"""GET /api/v1/schema/: the OpenAPI schema, readable in a browser.

drf-spectacular answers a client that accepts anything with YAML as
``application/vnd.oai.openapi``, which a browser saves as a file: following the schema link
from the API root downloaded it. Such a client now gets the same YAML as ``text/plain``,
shown in the tab; a client that asks for ``application/json``,
``application/vnd.oai.openapi`` or ``application/vnd.oai.openapi+json`` gets what it asks.
"""

from drf_spectacular.renderers import OpenApiYamlRenderer
from drf_spectacular.views import SpectacularAPIView


class PlainTextYamlRenderer(OpenApiYamlRenderer):
    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"


class SchemaView(SpectacularAPIView):
    renderer_classes = [PlainTextYamlRenderer, *SpectacularAPIView.renderer_classes]

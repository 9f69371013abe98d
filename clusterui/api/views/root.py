from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from clusterui.api.views.base import ApiAuth

ENDPOINTS = ("nodes", "gpus", "nics", "jobs", "findings", "usage", "tokens", "schema", "docs")


class RootView(ApiAuth, APIView):
    @extend_schema(summary="The API's endpoints", responses={200: dict})
    def get(self, request):
        return Response({name: reverse(f"api:{name}-list" if name not in ("usage", "schema",
                                                                          "docs")
                                       else f"api:{name}", request=request)
                         for name in ENDPOINTS})


class SchemaView(ApiAuth, SpectacularAPIView):
    """The OpenAPI schema, readable with a token as well as a session."""

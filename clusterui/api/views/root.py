from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

ROUTES = {
    "nodes": "api:nodes-list", "gpus": "api:gpus-list", "nics": "api:nics-list",
    "jobs": "api:jobs-list", "findings": "api:findings-list", "usage": "api:usage",
    "tokens": "api:tokens-list", "schema": "api:schema", "docs": "api:docs",
}


class RootView(APIView):
    @extend_schema(summary="The API's endpoints", tags=["root"], responses={200: dict})
    def get(self, request):
        return Response({name: reverse(route, request=request) for name, route in ROUTES.items()})

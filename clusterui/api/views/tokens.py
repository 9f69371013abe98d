from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, viewsets

from clusterui.api.models import ApiToken
from clusterui.api.serializers.tokens import TokenSerializer


@extend_schema_view(
    list=extend_schema(summary="Your API tokens (never their keys)"),
    destroy=extend_schema(summary="Revoke one of your API tokens",
                          parameters=[OpenApiParameter("id", int, OpenApiParameter.PATH)]),
)
class TokenViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin,
                   viewsets.GenericViewSet):
    """Tokens are created on the web UI's token page, where the key is shown once."""

    serializer_class = TokenSerializer
    filter_backends = []

    def get_queryset(self):
        return ApiToken.objects.filter(user=self.request.user)

"""How the OpenAPI schema describes our token authentication."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class TokenAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "clusterui.api.tokens.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <key>` (or `Bearer <key>`), with a key made on the "
                           "API tokens page (/settings/tokens/).",
        }


ERROR_SCHEMA = {
    "type": "object",
    "properties": {"error": {"type": "string", "description": "What was wrong, in words"}},
    "required": ["error"],
}


def add_error_responses(result, generator, request, public):
    """Every operation can answer ``{"error": ...}`` with a 4xx (bad parameter, no or bad
    credentials, not found, method not allowed): say so once, in the schema."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            operation.setdefault("responses", {})["4XX"] = {
                "description": "Bad request, unauthenticated, forbidden or not found",
                "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Error"}}},
            }
    return result

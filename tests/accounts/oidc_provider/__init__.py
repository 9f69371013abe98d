"""A real OpenID Connect provider for the OIDC sign-in tests: django-oidc-provider
(juanifioren/django-oidc-provider, pinned in the test extra) in a Django project of its own,
run by tests/accounts/oidcop.py as a separate gunicorn process on a free port with its own
SQLite database. It serves discovery, a sign-in form, the authorization code flow, RS256 ID
tokens signed with a key generated at start, JWKS and userinfo, over real HTTP."""

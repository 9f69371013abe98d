"""The test provider's Django settings: nothing of ClusterUI's, a SQLite file in the
directory the test session gives it (OIDC_OP_DIR), its public URL in OIDC_OP_URL."""

import os
from pathlib import Path

BASE = Path(os.environ["OIDC_OP_DIR"])
SECRET_KEY = "test-oidc-provider-only"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
INSTALLED_APPS = ["django.contrib.auth", "django.contrib.contenttypes",
                  "django.contrib.sessions", "oidc_provider"]
MIDDLEWARE = ["django.contrib.sessions.middleware.SessionMiddleware",
              "django.middleware.csrf.CsrfViewMiddleware",
              "django.contrib.auth.middleware.AuthenticationMiddleware"]
ROOT_URLCONF = "tests.accounts.oidc_provider.urls"
TEMPLATES = [{
    "BACKEND": "django.template.backends.django.DjangoTemplates",
    "DIRS": [Path(__file__).parent / "templates"],
    "APP_DIRS": True,
    "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                       "django.contrib.auth.context_processors.auth"]},
}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3",
                         "NAME": str(BASE / "provider.sqlite3")}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
USE_TZ = True
LOGIN_URL = "/accounts/login/"
SITE_URL = os.environ["OIDC_OP_URL"]
OIDC_USERINFO = "tests.accounts.oidc_provider.claims.userinfo"
OIDC_EXTRA_SCOPE_CLAIMS = "tests.accounts.oidc_provider.claims.SiteClaims"
OIDC_IDTOKEN_PROCESSING_HOOK = "tests.accounts.oidc_provider.claims.spoil_for_tests"

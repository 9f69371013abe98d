"""OpenID Connect sign-in's settings: off unless OIDC_ISSUER is set, and a precise message
for each mistake (clusterui/accounts/oidc_config.py)."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from clusterui.accounts.oidc_config import oidc_config

BASE = {"OIDC_ISSUER": "https://keycloak.example.org/realms/hpc/",
        "OIDC_CLIENT_ID": "clusterui", "OIDC_CLIENT_SECRET": "s3cret"}


def test_off_unless_the_issuer_is_set():
    assert oidc_config({}) is None
    assert oidc_config({"OIDC_CLIENT_ID": "clusterui", "OIDC_CLIENT_SECRET": "x"}) is None


def test_the_defaults_and_the_secret_from_a_file(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("from-a-file\n")
    config = oidc_config({**BASE, "OIDC_CLIENT_SECRET": "", "OIDC_CLIENT_SECRET_FILE":
                          str(secret)})
    assert config["CLIENT_SECRET"] == "from-a-file"
    assert config["ISSUER"] == "https://keycloak.example.org/realms/hpc"  # no trailing /
    assert (config["SCOPES"], config["USERNAME_CLAIM"], config["GROUPS_CLAIM"],
            config["SCHEDULER_USER"], config["STAFF_GROUP"], config["PROVIDER_NAME"]) == (
        ["openid", "email", "profile"], "preferred_username", "groups", "{login}", "",
        "single sign-on")
    assert config["SIGN_OUT_AT_PROVIDER"] is False and config["ACCOUNT_LEADER_GROUP_PREFIX"] == ""


def test_plain_http_only_when_allowed():
    http = {**BASE, "OIDC_ISSUER": "http://127.0.0.1:8080"}
    with pytest.raises(ImproperlyConfigured, match="plain http only with OIDC_ALLOW_HTTP=1"):
        oidc_config(http)
    assert oidc_config({**http, "OIDC_ALLOW_HTTP": "1"})["ISSUER"] == "http://127.0.0.1:8080"


@pytest.mark.parametrize("environ, message", [
    ({"OIDC_ISSUER": "https://sso.example.org"},
     "OIDC_CLIENT_ID is required when OIDC_ISSUER is set"),
    ({**BASE, "OIDC_CLIENT_SECRET": ""},
     "OIDC_CLIENT_SECRET (or OIDC_CLIENT_SECRET_FILE) is required when OIDC_ISSUER is set"),
    ({**BASE, "OIDC_CLIENT_SECRET_FILE": "/nonexistent/secret"},
     "OIDC_CLIENT_SECRET_FILE: cannot read '/nonexistent/secret'"),
    ({**BASE, "OIDC_ISSUER": "keycloak.example.org/realms/hpc"},
     "OIDC_ISSUER must be the provider's https:// issuer URL"),
    ({**BASE, "OIDC_ISSUER": "https://sso.example.org/?realm=hpc"},
     "OIDC_ISSUER has no query or fragment"),
    ({**BASE, "OIDC_SCOPES": "email,profile"}, "OIDC_SCOPES must include openid"),
    ({**BASE, "OIDC_USERNAME_CLAIM": "preferred username"},
     "OIDC_USERNAME_CLAIM must be a claim name"),
    ({**BASE, "OIDC_GROUPS_CLAIM": ""}, "OIDC_GROUPS_CLAIM must be a claim name"),
    ({**BASE, "OIDC_SCHEDULER_USER": "hpc"}, "OIDC_SCHEDULER_USER must hold a placeholder"),
    ({**BASE, "OIDC_SCHEDULER_USER": "{login"}, "OIDC_SCHEDULER_USER: "),
    ({**BASE, "OIDC_ALLOW_HTTP": "maybe"}, "OIDC_ALLOW_HTTP must be a boolean"),
    ({**BASE, "OIDC_TIMEOUT_S": "0"}, "OIDC_TIMEOUT_S must be at least 1"),
    ({**BASE, "OIDC_LEEWAY_S": "3600"}, "OIDC_LEEWAY_S must be at most 300"),
])
def test_a_mistake_is_named(environ, message):
    with pytest.raises(ImproperlyConfigured) as raised:
        oidc_config(environ)
    assert str(raised.value).startswith(message)

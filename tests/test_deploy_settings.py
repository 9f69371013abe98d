"""Production settings pass Django's deployment checks, and refuse to start unsafely."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def manage(*args, **env):
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("SECURE_", "SESSION_", "CSRF_", "DEBUG", "SECRET_KEY",
                                  "DJANGO_ALLOW_ASYNC_UNSAFE"))}
    clean["DJANGO_SETTINGS_MODULE"] = "clusterui.settings"
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, text=True,
                          capture_output=True, env={**clean, **env})


def test_check_deploy_is_clean_with_production_settings():
    result = manage("check", "--deploy", "--fail-level", "WARNING",
                    SECRET_KEY=secrets.token_urlsafe(60), ALLOWED_HOSTS="clusterui.example.org")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_production_refuses_to_start_without_a_secret_key():
    result = manage("check")
    assert result.returncode != 0
    assert "SECRET_KEY is required and is not set" in result.stderr


def test_a_bad_setting_names_the_variable():
    result = manage("check", SECRET_KEY="x" * 60, INGEST_MAX_ROWS="lots")
    assert result.returncode != 0
    assert "INGEST_MAX_ROWS must be an integer, got 'lots'" in result.stderr


def test_a_retired_setting_is_refused_with_its_replacement():
    result = manage("check", SECRET_KEY="x" * 60, RAW_HOT_HOURS="2")
    assert result.returncode != 0
    assert "RAW_HOT_HOURS is no longer read: set RAW_HOT_MINUTES" in result.stderr


def test_the_retired_sign_in_settings_are_refused_with_what_to_set_instead():
    result = manage("check", SECRET_KEY="x" * 60, LOGIN_TRUST_X_FORWARDED_FOR="1")
    assert result.returncode != 0
    assert ("LOGIN_TRUST_X_FORWARDED_FOR is no longer read: set LOGIN_TRUSTED_PROXIES"
            in result.stderr)
    result = manage("check", SECRET_KEY="x" * 60, LOGIN_MAX_FAILURES_PER_USER="5")
    assert result.returncode != 0
    assert ("LOGIN_MAX_FAILURES_PER_USER is no longer read: set LOGIN_MAX_FAILURES_PER_PAIR"
            in result.stderr)


def test_trusted_proxies_must_be_networks():
    result = manage("check", SECRET_KEY="x" * 60, LOGIN_TRUSTED_PROXIES="10.0.0.0/8, proxy")
    assert result.returncode != 0
    assert ("LOGIN_TRUSTED_PROXIES must be comma-separated addresses or CIDRs, got 'proxy'"
            in result.stderr)

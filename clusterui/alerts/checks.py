"""Configuration mistakes in the alert settings, as system checks (``manage.py check``)."""

from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import Error, Warning, register


@register()
def check_alert_settings(app_configs=None, **kwargs):
    problems = []
    pattern = settings.ALERT_EMAIL_PATTERN
    if pattern and (pattern.count("{user}") != 1 or "@" not in pattern
                    or pattern.replace("{user}", "").count("{")):
        problems.append(Error(
            f"ALERT_EMAIL_PATTERN must contain {{user}} once and an @, got {pattern!r}",
            hint='For example ALERT_EMAIL_PATTERN="{user}@example.org"', id="alerts.E001"))
    site = urlsplit(settings.SITE_URL)
    if site.scheme not in {"http", "https"} or not site.netloc:
        problems.append(Error(
            f"SITE_URL must be an absolute http(s) URL: emails link to it, got "
            f"{settings.SITE_URL!r}", hint="For example SITE_URL=https://clusterui.example.org",
            id="alerts.E002"))
    for account, addresses in settings.ALERT_ACCOUNT_MANAGERS.items():
        bad = [a for a in addresses if "@" not in a]
        if bad:
            problems.append(Error(
                f"ALERT_ACCOUNT_MANAGERS: account {account!r} has addresses without an @: "
                f"{', '.join(bad)}", id="alerts.E003"))
    if settings.ALERT_NOTIFY_ADMINS and not settings.ADMINS:
        problems.append(Warning(
            "ALERT_NOTIFY_ADMINS is on but ADMIN_EMAILS is empty: no admin gets alert emails",
            id="alerts.W001"))
    return problems

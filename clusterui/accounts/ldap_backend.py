"""Sign-in with the site's directory (LDAP), next to the local accounts.

Django's ModelBackend runs first: a local account signs in as before, whether or not the
directory answers. Then this backend checks the login against the directory
(clusterui/accounts/directory.py) and writes the Django user: created on first sign-in
with no usable local password, its names and email copied, ``is_staff`` set from
membership of LDAP_STAFF_GROUP at every sign-in (so removal from the group takes staff away
at the next one), the accounts the user leads (the groups named
LDAP_ACCOUNT_LEADER_GROUP_PREFIX + account, likewise at every sign-in), and the scheduler
user name (LDAP_SCHEDULER_USER) that decides which jobs
are theirs. A login that names a local account is left to ModelBackend: the directory never
takes a local account over.

When the directory cannot be reached the attempt fails and the request is marked, so the
sign-in form says so (clusterui/accounts/views.py) instead of "wrong password".
"""

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.db import transaction
from ldap3.core.exceptions import LDAPException

from clusterui.accounts import directory
from clusterui.accounts.choices import AccountSource
from clusterui.accounts.ldap_config import USER_ATTRIBUTES, placeholders
from clusterui.accounts.models import DirectoryAccount

log = logging.getLogger(__name__)


def _wanted_attributes(config: dict) -> list[str]:
    mapped = [f for f in placeholders("LDAP_SCHEDULER_USER", config["SCHEDULER_USER"])
              if f not in ("login", "dn")]
    return sorted({*USER_ATTRIBUTES.values(), *mapped})


def _scheduler_user(config: dict, login: str, entry: directory.Entry) -> str | None:
    values = {**entry.attributes, "login": login, "dn": entry.dn}
    try:
        name = config["SCHEDULER_USER"].format(**values).strip()
    except KeyError as exc:
        log.error("LDAP: %s has no attribute %s for LDAP_SCHEDULER_USER", entry.dn, exc)
        return None
    return name or None


class LDAPBackend(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        config = settings.LDAP
        if not config or not username or not password:
            return None
        User = get_user_model()
        existing = User._default_manager.filter(**{User.USERNAME_FIELD: username}).first()
        if existing is not None:
            if not DirectoryAccount.objects.filter(user=existing,
                                                   source=AccountSource.LDAP).exists():
                return None  # a local (or OpenID Connect) account: not the directory's
            if not self.user_can_authenticate(existing):
                return None
        try:
            entry = directory.check_password(config, username, password,
                                             _wanted_attributes(config))
        except LDAPException as exc:
            log.error("LDAP: cannot check %r against %s: %s", username,
                      config["SERVER_URI"], exc)
            if request is not None:
                request.ldap_unavailable = True
            return None
        if entry is None:
            return None
        scheduler_user = _scheduler_user(config, username, entry)
        if scheduler_user is None:
            return None
        return self._sync(config, username, entry, scheduler_user)

    @transaction.atomic
    def _sync(self, config, username, entry, scheduler_user):
        User = get_user_model()
        user, created = User._default_manager.get_or_create(
            **{User.USERNAME_FIELD: username})
        if created:
            user.set_unusable_password()
        for field, attribute in USER_ATTRIBUTES.items():
            setattr(user, field, entry.attributes.get(attribute, "")[:150])
        if config["STAFF_GROUP"]:
            user.is_staff = config["STAFF_GROUP"] in entry.groups
        user.save()
        prefix = config.get("ACCOUNT_LEADER_GROUP_PREFIX", "")
        led = sorted(g[len(prefix):] for g in entry.groups
                     if prefix and g.startswith(prefix) and len(g) > len(prefix))
        DirectoryAccount.objects.update_or_create(
            user=user, defaults={"dn": entry.dn, "scheduler_user": scheduler_user[:64],
                                 "led_accounts": led})
        return user if self.user_can_authenticate(user) else None

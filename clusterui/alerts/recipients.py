"""Who gets a finding's email: the job's owner, and (as settings say) account managers and
admins. One email per address, so every unsubscribe link and daily limit is personal."""

import logging
import re
from dataclasses import dataclass

from django.conf import settings

from clusterui.accounts.models import owner_of
from clusterui.alerts.choices import RecipientRole

log = logging.getLogger(__name__)

# The names ``ALERT_EMAIL_PATTERN`` is filled in with: a user name as POSIX defines one (the
# portable filename characters, no hyphen first: IEEE Std 1003.1-2017, 3.437 "User Name"),
# and not starting or ending with a dot, so that the result is one address in the pattern's
# domain (RFC 5322's dot-atom local part). A job's user is whatever its node reported: one
# with "@", ",", spaces, quotes or angle brackets would make an address elsewhere, or
# several, or none that parses.
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_-])?")


@dataclass(frozen=True)
class Recipient:
    address: str
    role: str
    username: str = ""


def normalize(address: str) -> str:
    return address.strip().lower()


def owner(job) -> Recipient | None:
    """The job's owner: the user whose scheduler name on the job's cluster is the job's user
    (``accounts.models.owner_of``: for an LDAP user the directory's mapping, not the login),
    at the address their preferences page shows (``address_of``), with their login; without
    such a user, ``ALERT_EMAIL_PATTERN`` filled in with the job's user (no login) when it
    is a plain user name (``pattern_address``); else none."""
    if not job.user:
        return None
    user = owner_of(job.cluster_id, job.user)
    if user is not None:
        address = address_of(user)
        return Recipient(address, RecipientRole.OWNER, user.get_username()) if address else None
    address = pattern_address(job.user)
    if address is None:
        if settings.ALERT_EMAIL_PATTERN:  # a name a node reported that the pattern refuses
            log.warning("no alert address for job user %r: ALERT_EMAIL_PATTERN is filled in "
                        "only with a plain user name (letters, digits, '.', '_', '-')",
                        job.user[:80])
        return None
    return Recipient(address, RecipientRole.OWNER)


def address_of(user) -> str | None:
    """The address alert emails for ``user`` go to (the preferences page shows it)."""
    if user.email:
        return normalize(user.email)
    return pattern_address(user.get_username())


def pattern_address(name: str) -> str | None:
    """``ALERT_EMAIL_PATTERN`` filled in with ``name``; None without a pattern, or when
    ``name`` is not a plain user name (``_PLAIN_NAME``, no ".." either). Silent: the
    preferences page and the mailbox ask for every view (``owner`` logs a job's refusal)."""
    if not settings.ALERT_EMAIL_PATTERN or not _PLAIN_NAME.fullmatch(name) or ".." in name:
        return None
    return normalize(settings.ALERT_EMAIL_PATTERN.format(user=name))


def admin_addresses() -> list[str]:
    return [normalize(address) for _, address in settings.ADMINS]


def for_finding(finding) -> list[Recipient]:
    """A job's finding goes to its owner, its account's managers, and admins when
    ALERT_NOTIFY_ADMINS is on. A node's finding (no job: GPU errors on a GPU no job held) has
    no owner: it goes to the admins."""
    found: list[Recipient] = []
    job = finding.job
    if job is not None:
        if (recipient := owner(job)) is not None:
            found.append(recipient)
        for manager in settings.ALERT_ACCOUNT_MANAGERS.get(job.account, []):
            found.append(Recipient(normalize(manager), RecipientRole.ACCOUNT_MANAGER))
    if settings.ALERT_NOTIFY_ADMINS or job is None:
        found.extend(Recipient(a, RecipientRole.ADMIN) for a in admin_addresses())
    unique: dict[str, Recipient] = {}
    for recipient in found:  # the first role wins: an owner who is also an admin is the owner
        unique.setdefault(recipient.address, recipient)
    return list(unique.values())

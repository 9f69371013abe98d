"""Who gets a finding's email: the job's owner, and (as settings say) account managers and
admins. One email per address, so every unsubscribe link and daily limit is personal."""

from dataclasses import dataclass

from django.conf import settings

from clusterui.accounts.models import owner_of
from clusterui.alerts.choices import RecipientRole


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
    such a user, ``ALERT_EMAIL_PATTERN`` filled in with the job's user (no login); else
    none."""
    if not job.user:
        return None
    user = owner_of(job.cluster_id, job.user)
    if user is not None:
        address = address_of(user)
        return Recipient(address, RecipientRole.OWNER, user.get_username()) if address else None
    if settings.ALERT_EMAIL_PATTERN:
        return Recipient(normalize(settings.ALERT_EMAIL_PATTERN.format(user=job.user)),
                         RecipientRole.OWNER)
    return None


def address_of(user) -> str | None:
    """The address alert emails for ``user`` go to (the preferences page shows it)."""
    if user.email:
        return normalize(user.email)
    if settings.ALERT_EMAIL_PATTERN:
        return normalize(settings.ALERT_EMAIL_PATTERN.format(user=user.get_username()))
    return None


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

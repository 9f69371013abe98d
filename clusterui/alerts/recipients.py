"""Who gets a finding's email: the job's owner, and (as settings say) account managers and
admins. One email per address, so every unsubscribe link and daily limit is personal."""

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model

from clusterui.alerts.choices import RecipientRole


@dataclass(frozen=True)
class Recipient:
    address: str
    role: str
    username: str = ""


def normalize(address: str) -> str:
    return address.strip().lower()


def owner_address(username: str) -> str | None:
    """The address of the scheduler user ``username``: the email of the Django user with that
    username, else ``ALERT_EMAIL_PATTERN`` filled in, else none."""
    if not username:
        return None
    user = get_user_model().objects.filter(username=username).only("email").first()
    if user is not None and user.email:
        return normalize(user.email)
    if settings.ALERT_EMAIL_PATTERN:
        return normalize(settings.ALERT_EMAIL_PATTERN.format(user=username))
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
        address = owner_address(job.user)
        if address:
            found.append(Recipient(address, RecipientRole.OWNER, job.user))
        for manager in settings.ALERT_ACCOUNT_MANAGERS.get(job.account, []):
            found.append(Recipient(normalize(manager), RecipientRole.ACCOUNT_MANAGER))
    if settings.ALERT_NOTIFY_ADMINS or job is None:
        found.extend(Recipient(a, RecipientRole.ADMIN) for a in admin_addresses())
    unique: dict[str, Recipient] = {}
    for recipient in found:  # the first role wins: an owner who is also an admin is the owner
        unique.setdefault(recipient.address, recipient)
    return list(unique.values())

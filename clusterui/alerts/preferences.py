"""Opt-outs by category, and the signed unsubscribe link that sets them without a login."""

from django.conf import settings
from django.core import signing
from django.urls import reverse

from clusterui.alerts.choices import ALL, CATEGORY_HELP, DIGEST, category_label
from clusterui.alerts.models import OptIn, OptOut
from clusterui.alerts.recipients import admin_addresses, normalize

_SALT = "clusterui.alerts.unsubscribe"


def is_opted_out(address: str, category: str) -> bool:
    return OptOut.objects.filter(address=normalize(address), category__in=[category, ALL]).exists()


def opted_out(address: str) -> set[str]:
    return set(OptOut.objects.filter(address=normalize(address)).values_list("category", flat=True))


def opt_out(address: str, category: str) -> None:
    OptOut.objects.get_or_create(address=normalize(address), category=category)


def opt_in(address: str, category: str) -> None:
    """Turn ``category`` back on; opting back into everything also clears 'all'."""
    categories = [category, ALL] if category != ALL else [ALL]
    OptOut.objects.filter(address=normalize(address), category__in=categories).delete()


def wants_every(address: str, category: str) -> bool:
    """Whether ``address`` asked for ``category`` beyond its default (the job-end summary
    of every job, not only of wasteful ones)."""
    return OptIn.objects.filter(address=normalize(address), category=category).exists()


def set_every(address: str, category: str, on: bool) -> None:
    if on:
        OptIn.objects.get_or_create(address=normalize(address), category=category)
    else:
        OptIn.objects.filter(address=normalize(address), category=category).delete()


def set_enabled(address: str, enabled: set[str], categories: list[str]) -> None:
    """The preferences form: ``categories`` offered, ``enabled`` those left ticked."""
    address = normalize(address)
    OptOut.objects.filter(address=address, category=ALL).delete()
    for category in categories:
        if category in enabled:
            OptOut.objects.filter(address=address, category=category).delete()
        else:
            OptOut.objects.get_or_create(address=address, category=category)


def categories_for(address: str | None, *, is_staff: bool) -> list[tuple[str, str, str]]:
    """(category, label, help) the preferences page offers: every finding kind, and the
    digest for those who receive it."""
    offered = [c for c in CATEGORY_HELP if c != DIGEST]
    if is_staff or (address and address in admin_addresses()):
        offered.append(DIGEST)
    return [(c, category_label(c), CATEGORY_HELP[c]) for c in offered]


def unsubscribe_token(address: str, category: str) -> str:
    return signing.dumps({"to": normalize(address), "c": category}, salt=_SALT, compress=True)


def read_unsubscribe_token(token: str) -> tuple[str, str]:
    """(address, category) from a link's token; ``signing.BadSignature`` when forged."""
    data = signing.loads(token, salt=_SALT)
    if not isinstance(data, dict) or not isinstance(data.get("to"), str) \
            or not isinstance(data.get("c"), str):
        raise signing.BadSignature("malformed unsubscribe token")
    return data["to"], data["c"]


def unsubscribe_url(address: str, category: str) -> str:
    return settings.SITE_URL + reverse("alert-unsubscribe", args=[unsubscribe_token(address, category)])

"""Create the test provider's database: tables, a fresh RSA signing key, the people of
people.py and ClusterUI's confidential client. Run once, before gunicorn starts."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.accounts.oidc_provider.settings")
django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from oidc_provider.models import Client, ResponseType  # noqa: E402

from tests.accounts.oidc_provider import people  # noqa: E402


def main() -> None:
    call_command("migrate", verbosity=0)
    call_command("creatersakey")
    for login, password in people.PASSWORDS.items():
        first, last = people.NAMES[login]
        User.objects.create_user(login, f"{login}@example.org", password,
                                 first_name=first, last_name=last)
    for name, members in people.GROUPS.items():
        Group.objects.create(name=name).user_set.set(User.objects.filter(username__in=members))
    client = Client.objects.create(
        name="ClusterUI", client_type="confidential", client_id=people.CLIENT_ID,
        client_secret=people.CLIENT_SECRET, jwt_alg="RS256", require_consent=False,
        _redirect_uris=people.REDIRECT_URI,
        _post_logout_redirect_uris=people.POST_LOGOUT_REDIRECT_URI)
    client.response_types.set([ResponseType.objects.get(value="code")])


if __name__ == "__main__":
    main()

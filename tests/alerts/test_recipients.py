"""Who a finding's email goes to (clusterui/alerts/recipients.py): the job's owner is the
user whose scheduler name on the job's cluster is the job's user, so an LDAP user whose
login is not their scheduler name, and a user with another name on one cluster, get their
own jobs' emails and nobody else's."""

import pytest
from django.contrib.auth import get_user_model

from clusterui.accounts.ldap_config import ldap_config
from clusterui.accounts.models import ClusterLogin, DirectoryAccount
from clusterui.alerts.choices import RecipientRole
from clusterui.alerts.recipients import for_finding
from tests import rows

pytestmark = pytest.mark.django_db


def owners(finding) -> list[str]:
    return [r.address for r in for_finding(finding) if r.role == RecipientRole.OWNER]


@pytest.fixture
def ldap_on(settings):
    settings.LDAP = ldap_config({"LDAP_SERVER_URI": "ldap://ldap.example.org",
                                 "LDAP_USER_SEARCH_BASE": "ou=people,dc=example,dc=org",
                                 "LDAP_USER_FILTER": "(mail={login})",
                                 "LDAP_SCHEDULER_USER": "{uid}"})
    settings.ALERT_EMAIL_PATTERN = "{user}@hpc.example.org"


def test_an_ldap_users_job_goes_to_them_not_to_the_pattern(ldap_on):
    # Signs in with the email address; the scheduler knows her as carol.
    carol = get_user_model().objects.create_user("carol@example.org", "c.cooper@example.org")
    DirectoryAccount.objects.create(user=carol, dn="uid=carol,ou=people,dc=example,dc=org",
                                    scheduler_user="carol")
    finding = rows.finding(rows.job("carol"))
    assert owners(finding) == ["c.cooper@example.org"]
    # The email is recorded as hers: her login, not the scheduler's name for her.
    assert [r.username for r in for_finding(finding)] == ["carol@example.org"]
    # A job whose user is her login is not hers: the scheduler has no such user. Nor does
    # the pattern make it an address: only a plain user name fills it in.
    assert owners(rows.finding(rows.job("carol@example.org"))) == []


def test_a_local_user_whose_login_is_an_ldap_users_scheduler_name_is_not_the_owner(ldap_on):
    get_user_model().objects.create_user("dave", "local-dave@example.org")
    d = get_user_model().objects.create_user("dsmith", "d.smith@example.org")
    DirectoryAccount.objects.create(user=d, dn="uid=dave,ou=people,dc=example,dc=org",
                                    scheduler_user="dave")
    assert owners(rows.finding(rows.job("dave"))) == ["d.smith@example.org"]


def test_a_per_cluster_name_decides_the_owner_on_that_cluster(settings):
    settings.ALERT_EMAIL_PATTERN = ""
    alice = get_user_model().objects.create_user("alice", "alice@example.org")
    ClusterLogin.objects.create(user=alice, cluster=rows.cluster("gpu-b"),
                                scheduler_user="asmith")
    assert owners(rows.finding(rows.job("alice", cluster_name="gpu-a"))) == [
        "alice@example.org"]
    assert owners(rows.finding(rows.job("asmith", cluster_name="gpu-b"))) == [
        "alice@example.org"]
    # 'alice' on gpu-b is someone else, whom nobody here is.
    assert owners(rows.finding(rows.job("alice", cluster_name="gpu-b"))) == []

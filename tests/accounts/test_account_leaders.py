"""ACCOUNT_LEADERS (clusterui/accounts/leaders.py): who leads which account, on every
cluster or on one, and a precise message for a malformed value."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from clusterui.accounts.leaders import account_leaders


def test_accounts_on_every_cluster_or_on_one():
    led = account_leaders({"ACCOUNT_LEADERS": "nlp=alice,bob; gpu-b/vision=alice"})
    assert led == {"alice": {(None, "nlp"), ("gpu-b", "vision")}, "bob": {(None, "nlp")}}
    assert account_leaders({}) == {}


@pytest.mark.parametrize("value, message", [
    ("nlp", "ACCOUNT_LEADERS must look like 'key=a,b;other=c', got the part 'nlp'"),
    ("/nlp=alice", "ACCOUNT_LEADERS: '/nlp' must be an account or cluster/account"),
    ("gpu-b/=alice", "ACCOUNT_LEADERS: 'gpu-b/' must be an account or cluster/account"),
])
def test_a_mistake_is_named(value, message):
    with pytest.raises(ImproperlyConfigured) as raised:
        account_leaders({"ACCOUNT_LEADERS": value})
    assert str(raised.value).startswith(message)

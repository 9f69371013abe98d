"""Pages of the jobs list sorted by an efficiency figure: split in two index-friendly queries
(``clusterui.jobs.listing``), they hold exactly the rows, in exactly the order, of the one
query they replace; and a count beyond the exact bound is an estimate, said so."""

import pytest

from clusterui.jobs import listing
from clusterui.jobs.filtersets import JobFilterSet, with_efficiency
from clusterui.jobs.models import Job
from tests import rows as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def jobs(db):
    # Ties on waste (broken by newest id), and jobs with no efficiency row (listed last).
    for user, wasted in (("alice", 5), ("bob", 9), ("alice", 5), ("alice", None), ("bob", 1),
                         ("alice", 0), ("bob", None), ("alice", 9), ("alice", None)):
        f.job(user, efficiency=None if wasted is None else {"allocated": 10,
                                                             "used": 10 - wasted})


def ordered(params):
    filters = JobFilterSet(params, queryset=with_efficiency(Job.objects.all()))
    assert filters.is_valid()
    return filters.qs, filters.form.cleaned_data["ordering"]


@pytest.mark.parametrize("params", [
    {"ordering": "-wasted"},  # every job: page ids straight from the efficiency index
    {"ordering": "-wasted", "user": "alice"},  # filtered: the joined query
    {"ordering": "efficiency"},
    {"ordering": "-gpu_hours"},
])
def test_every_slice_matches_the_single_query(jobs, params):
    qs, ordering = ordered(params)
    split = listing.ordered_for_pages(qs, ordering)
    assert isinstance(split, listing.FiguresFirst)
    expected = [j.pk for j in qs]
    assert split.count() == len(expected)
    for start in range(len(expected) + 1):
        for size in (1, 2, 3, 50):
            got = [j.pk for j in split[start:start + size]]
            assert got == expected[start:start + size], (start, size)


def test_other_orderings_stay_one_query(jobs):
    qs, ordering = ordered({"ordering": "-started"})
    assert listing.ordered_for_pages(qs, ordering) is qs


def test_counts_are_exact_up_to_the_bound_then_estimated(jobs, monkeypatch):
    qs, _ = ordered({})
    assert listing.JobPaginator(qs, 50).count == 9
    assert not listing.JobPaginator(qs, 50).estimated
    monkeypatch.setattr(listing, "EXACT_COUNT_UP_TO", 3)
    paginator = listing.JobPaginator(qs, 2)
    assert paginator.count >= 4 and paginator.estimated

"""The collector's reading of ``scontrol show job -o``, on text a real Slurm printed
(tests/data/scontrol-22.05/README.md says how each file was captured)."""

from pathlib import Path

import pytest

from collectors.attribution.metadata import START_KEYS, exit_facts, parse_scontrol_text

DATA = Path(__file__).resolve().parents[1] / "data" / "scontrol-22.05"


def parsed(name: str) -> dict[str, str]:
    return parse_scontrol_text((DATA / name).read_text())


def test_a_running_job_gives_its_walltime_submit_time_and_queue_wait():
    job = parsed("running.txt")
    assert job["time_limit_s"] == str(4 * 60)  # --time=4:00, TimeLimit=00:04:00
    assert int(job["start_time"]) - int(job["submit_time"]) == 2  # 20:45:07 -> 20:45:09
    assert (job["name"], job["user"], job["uid"], job["partition"]) == (
        "walltime test", "nobody", "65534", "gpu")  # a name with a space stays whole
    assert job["state"] == "RUNNING" and exit_facts(job) is None


@pytest.mark.parametrize(("name", "seconds"), [
    ("days.txt", ((24 + 2) * 60 + 4) * 60),  # TimeLimit=1-02:04:00
    ("timeout.txt", 60),  # TimeLimit=00:01:00
    ("unlimited.txt", None),  # TimeLimit=UNLIMITED: no limit, nothing invented
    ("backfill-unlimited.txt", None),  # 365-00:00:00: backfill's stand-in for no limit
])  # fmt: skip
def test_time_limit_forms(name, seconds):
    assert parsed(name).get("time_limit_s") == (None if seconds is None else str(seconds))


def test_a_pending_job_has_a_submit_time_and_no_start():
    job = parsed("pending.txt")
    assert "submit_time" in job and "start_time" not in job
    assert job["time_limit_s"] == "600"  # the partition's MaxTime=10 as its limit


@pytest.mark.parametrize(("name", "facts"), [
    ("failed.txt", {"exit_state": "failed", "exit_code": "3", "exit_signal": "0"}),
    ("cancelled.txt", {"exit_state": "cancelled", "exit_code": "0", "exit_signal": "0"}),
    ("timeout.txt", {"exit_state": "timeout", "exit_code": "0", "exit_signal": "15"}),
])  # fmt: skip
def test_the_exit_state_of_an_ended_job(name, facts):
    assert exit_facts(parsed(name)) == facts


@pytest.mark.parametrize("name", ["completing-failed.txt", "completing-cancelled.txt",
                                  "completing-timeout.txt"])
def test_a_completing_job_has_no_exit_state_yet(name):
    """While its Epilog runs Slurm says COMPLETING: the final state is asked again later."""
    job = parsed(name)
    assert job["state"] == "COMPLETING" and exit_facts(job) is None


def test_a_first_look_keeps_no_end_facts():
    """A running job's ExitCode=0:0 is not an exit: the first look keeps start facts only."""
    assert not {"state", "exit_code", "exit_signal"} & set(START_KEYS)

"""Alert settings from the environment (typed readers that name the variable they refuse),
the system checks, and the beat entries."""

import datetime as dt

import pytest
from django.core.exceptions import ImproperlyConfigured

from clusterui.alerts.checks import check_alert_settings
from clusterui.celery import _entry, app
from clusterui.envconfig import env_choice, env_mapping, env_time_window, env_weekdays


def test_quiet_hours_read_as_a_local_time_range():
    assert env_time_window("Q", environ={"Q": "20:00-08:30"}) == (dt.time(20), dt.time(8, 30))
    assert env_time_window("Q", environ={}) is None
    assert env_time_window("Q", environ={"Q": " "}) is None
    for bad in ("20-8", "25:00-07:00", "20:00", "20:00-20:00"):
        with pytest.raises(ImproperlyConfigured, match="^Q "):
            env_time_window("Q", environ={"Q": bad})


def test_weekdays_read_as_names_and_ranges():
    assert env_weekdays("D", "mon-sun", environ={}) == frozenset(range(7))
    assert env_weekdays("D", "", environ={"D": "mon-fri"}) == frozenset(range(5))
    assert env_weekdays("D", "", environ={"D": "Friday-mon, wed"}) == {4, 5, 6, 0, 2}
    for bad in ("funday", "monkey", ","):
        with pytest.raises(ImproperlyConfigured, match="^D "):
            env_weekdays("D", "", environ={"D": bad})


def test_account_managers_read_as_a_mapping():
    raw = "nlp=lead@x.org, deputy@x.org; vision=v@x.org;"
    assert env_mapping("M", environ={"M": raw}) == {
        "nlp": ["lead@x.org", "deputy@x.org"], "vision": ["v@x.org"]}
    assert env_mapping("M", environ={}) == {}
    for bad in ("nlp", "=a@x.org", "nlp="):
        with pytest.raises(ImproperlyConfigured, match="^M must look like"):
            env_mapping("M", environ={"M": bad})


def test_the_minimum_severity_is_one_of_the_severities():
    assert env_choice("S", "warning", ("info", "warning"), environ={"S": "INFO"}) == "info"
    with pytest.raises(ImproperlyConfigured, match="S must be one of info, warning"):
        env_choice("S", "warning", ("info", "warning"), environ={"S": "loud"})


def test_configuration_mistakes_are_system_checks(settings):
    settings.ALERT_EMAIL_PATTERN = "{username}@example.org"
    settings.SITE_URL = "clusterui.example.org"
    settings.ALERT_ACCOUNT_MANAGERS = {"nlp": ["lead"]}
    settings.ALERT_NOTIFY_ADMINS, settings.ADMINS = True, []
    assert sorted(p.id for p in check_alert_settings()) == [
        "alerts.E001", "alerts.E002", "alerts.E003", "alerts.W001"]
    settings.ALERT_EMAIL_PATTERN = "{user}@example.org"
    settings.SITE_URL = "https://clusterui.example.org"
    settings.ALERT_ACCOUNT_MANAGERS = {"nlp": ["lead@example.org"]}
    settings.ADMINS = [("Ops", "ops@example.org")]
    assert check_alert_settings() == []


def test_beat_runs_the_alert_tasks_and_their_periods_come_from_the_environment(monkeypatch):
    schedule = app.conf.beat_schedule
    assert schedule["send-alerts"]["task"] == "clusterui.alerts.send_alerts"
    assert schedule["send-digest"]["task"] == "clusterui.alerts.send_digest"
    app.loader.import_default_modules()  # what a worker does at start: autodiscovery
    assert {"clusterui.alerts.send_alerts", "clusterui.alerts.send_digest"} <= set(app.tasks)
    monkeypatch.setenv("BEAT_ALERTS_S", "15")
    entry = _entry("clusterui.alerts.send_alerts", "BEAT_ALERTS_S", 60)
    assert entry["schedule"] == 15 and entry["options"]["expires"] == 13.5

"""The test settings plus the writer-fault app (for consumer processes started by tests)."""

from clusterui.settings_test import *  # noqa: F403
from clusterui.settings_test import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.faults.writerfault.apps.WriterFaultConfig"]

"""Django settings for ClusterUI.

Everything a deployment changes comes from the environment through the typed readers in
``clusterui.envconfig``; a bad value stops start-up with a message naming the variable.
The defaults are for a developer's machine only: ``SECRET_KEY`` has none unless DEBUG is on.
"""

import os
from datetime import timedelta
from pathlib import Path

import plotly

from clusterui.accounts.ldap_config import ldap_config
from clusterui.accounts.leaders import account_leaders
from clusterui.accounts.oidc_config import oidc_config
from clusterui.envconfig import (
    env_bool,
    env_choice,
    env_database,
    env_email,
    env_float,
    env_int,
    env_list,
    env_mapping,
    env_networks,
    env_retired,
    env_str,
    env_time_window,
    env_url,
    env_weekdays,
)

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", "dev-only-insecure-key-do-not-deploy" if DEBUG else None)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
SITE_URL = env_str("SITE_URL", "http://localhost:8000").rstrip("/")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "clusterui.accounts",
    "clusterui.inventory",
    "clusterui.jobs",
    "clusterui.telemetry",
    "clusterui.ingest",
    "clusterui.findings",
    "clusterui.gpuhealth",
    "clusterui.web",
    "clusterui.alerts",
    "clusterui.fabric",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "clusterui.api",
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Pages carry chart data (the 1,000-node overview ~0.5 MB): compress it. Django's
    # gzip pads responses against BREACH; WhiteNoise's pre-compressed files pass through.
    "django.middleware.gzip.GZipMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Turns django-axes' lockout into the sign-in page's 429 (AXES_LOCKOUT_CALLABLE).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "clusterui.urls"
WSGI_APPLICATION = "clusterui.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "clusterui.alerts.context_processors.alerts",
                "clusterui.web.cluster_choice.context",
                "clusterui.jobs.visibility.context",
            ],
        },
    },
]

DATABASES = {
    # DATABASE_PASSWORD(_FILE), when set, goes into the URL percent-encoded.
    "default": env_database("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/clusterui",
                            password="DATABASE_PASSWORD"),
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Shared by every web process: sign-in rate limits live here.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": env_url("CACHE_URL", "redis://127.0.0.1:6379/1", password="REDIS_PASSWORD"),
        "KEY_PREFIX": "clusterui",
    }
}
# --- Sign-in limits (clusterui/accounts; docs/operations.md "Sign-in limits and proxies") --
# The client's address: REMOTE_ADDR, or, when REMOTE_ADDR is one of these proxies (CIDRs),
# the right-most X-Forwarded-For hop that is not (clusterui/accounts/client_address.py).
LOGIN_TRUSTED_PROXIES = env_networks("LOGIN_TRUSTED_PROXIES", [])
# django-axes locks one (user name, address) pair after this many failures, for the window;
# nobody else, so an attacker elsewhere cannot lock a user out.
LOGIN_MAX_FAILURES_PER_PAIR = env_int("LOGIN_MAX_FAILURES_PER_PAIR", 5, minimum=1)
# One address guessing many user names is refused after this many failures in the window.
LOGIN_MAX_FAILURES_PER_ADDRESS = env_int("LOGIN_MAX_FAILURES_PER_ADDRESS", 30, minimum=1)
LOGIN_FAILURE_WINDOW_S = env_int("LOGIN_FAILURE_WINDOW_S", 900, minimum=60)
env_retired("LOGIN_TRUST_X_FORWARDED_FOR", "set LOGIN_TRUSTED_PROXIES to your proxies' "
            "addresses (comma-separated CIDRs, e.g. 172.16.0.0/12); X-Forwarded-For is then "
            "read from the right and only hops those proxies added are trusted")
env_retired("LOGIN_MAX_FAILURES_PER_USER", "set LOGIN_MAX_FAILURES_PER_PAIR: an account is "
            "now locked only for the address that failed (one user name and address pair)")
# The jobs and findings lists' CSV downloads (clusterui/web/csvexport.py) refuse filters
# that match more rows than this: narrow them, or page through the API.
EXPORT_MAX_ROWS = env_int("EXPORT_MAX_ROWS", 100_000, minimum=1)
# --- Prometheus (/metrics, clusterui/prometheus; docs/operations.md "Prometheus") ---------
# Served to a scrape carrying this bearer token (METRICS_TOKEN_FILE for a secret file), or
# coming from these networks (CIDRs; the client's address as above); neither: to nobody.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
if METRICS_TOKEN and len(METRICS_TOKEN) < 16:
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured("METRICS_TOKEN must be at least 16 characters (e.g. "
                               "openssl rand -hex 24)")
METRICS_ALLOWED_NETWORKS = env_networks("METRICS_ALLOWED_NETWORKS", [])
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked pair before the check
    "django.contrib.auth.backends.ModelBackend",
]
# --- LDAP sign-in (clusterui/accounts/ldap_config.py; docs/operations.md "LDAP sign-in") ---
# Off unless LDAP_SERVER_URI is set; local accounts (ModelBackend, first) keep working.
# django-auth-ldap's backend takes its AUTH_LDAP_* settings from LDAP (auth_ldap_settings).
LDAP = ldap_config()
if LDAP:
    AUTHENTICATION_BACKENDS.append("clusterui.accounts.ldap_backend.LDAPBackend")
# --- OpenID Connect sign-in (clusterui/accounts/oidc_config.py; docs/operations.md
# "OpenID Connect sign-in") --- Off unless OIDC_ISSUER is set; the sign-in page then offers
# "Sign in with <OIDC_PROVIDER_NAME>" next to the password form.
OIDC = oidc_config()
if OIDC:
    AUTHENTICATION_BACKENDS.append("clusterui.accounts.oidc_backend.OIDCBackend")
# Who leads which accounts (clusterui/accounts/leaders.py): a leader sees every job of
# their accounts, "nlp=alice,bob;gpu-b/vision=carol".
ACCOUNT_LEADERS = account_leaders()
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_FAILURE_LIMIT = LOGIN_MAX_FAILURES_PER_PAIR
AXES_COOLOFF_TIME = timedelta(seconds=LOGIN_FAILURE_WINDOW_S)
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "clusterui.accounts.client_address.client_address"
AXES_LOCKOUT_CALLABLE = "clusterui.accounts.views.locked_out"
# OpenID Connect callbacks are no password guesses (clusterui/accounts/oidc_backend.py).
AXES_WHITELIST_CALLABLE = "clusterui.accounts.oidc_backend.not_a_password_attempt"
AXES_VERBOSE = False
# Failures only: a row per successful sign-in would grow without bound.
AXES_DISABLE_ACCESS_LOG = True
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [
    BASE_DIR / "static",
    # plotly.js comes from the pinned plotly package itself: no CDN, no copy in the repo.
    ("plotly", Path(plotly.__file__).parent / "package_data"),
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if env_bool("STATIC_MANIFEST", not DEBUG)
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = DEBUG or not env_bool("STATIC_MANIFEST", not DEBUG)

EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
vars().update(env_email())
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "ClusterUI <clusterui@localhost>")
SERVER_EMAIL = DEFAULT_FROM_EMAIL
ADMINS = [("Admin", a) for a in env_list("ADMIN_EMAILS", [])]
# Seconds before a silent SMTP server counts as down (Django's default is to wait forever).
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 20, minimum=1)

# Production hardening; on by default whenever DEBUG is off.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", not DEBUG)
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", not DEBUG)
# Load balancers probe the health endpoint over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Celery (read by clusterui/celery.py with namespace="CELERY") --------------------
# REDIS_PASSWORD(_FILE), when set, goes into this URL and CACHE_URL percent-encoded.
CELERY_BROKER_URL = env_url("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0",
                            password="REDIS_PASSWORD")
# Celery reads the CELERY_BROKER_URL environment variable itself, over these settings: it
# must be the URL with the password in it.
if "CELERY_BROKER_URL" in os.environ:
    os.environ["CELERY_BROKER_URL"] = CELERY_BROKER_URL
# Redis with a guard against list items that are not messages (clusterui/broker.py).
CELERY_BROKER_TRANSPORT = ("clusterui.broker:Transport"
                           if CELERY_BROKER_URL.split("://", 1)[0] in ("redis", "rediss") else None)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {"clusterui.ingest": {"queue": "ingest"}}
# A worker killed mid-batch must not lose it: ack only after the task ran, and requeue
# when the worker process dies. The visibility timeout must outlast any task.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 300, minimum=5)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 2
CELERY_WORKER_PREFETCH_MULTIPLIER = env_int("CELERY_WORKER_PREFETCH_MULTIPLIER", 16, minimum=1)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A message whose worker died comes back after the visibility timeout (then a restore
# sweep, every CELERY_UNACKED_RESTORE_INTERVAL seconds, finds it).
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int(
        "CELERY_VISIBILITY_TIMEOUT", 600, minimum=CELERY_TASK_TIME_LIMIT + 1
    ),
    "unacked_restore_interval": env_int("CELERY_UNACKED_RESTORE_INTERVAL", 10, minimum=1),
    "unacked_restore_throttle": 1,
    "socket_timeout": 10,
    "socket_connect_timeout": 5,
}
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
if CELERY_BROKER_TRANSPORT_OPTIONS["visibility_timeout"] <= env_int(
        "INGEST_RETRY_BACKOFF_MAX", 30, minimum=1):
    from django.core.exceptions import ImproperlyConfigured

    raise ImproperlyConfigured(
        "CELERY_VISIBILITY_TIMEOUT must exceed INGEST_RETRY_BACKOFF_MAX: a retry waiting "
        "longer than the visibility timeout is redelivered while it waits")

# --- Ingest ---------------------------------------------------------------------------
# Refuse unsigned batches from clusters that have no ingest key (clusters with a key always
# require its signature). On by default outside development.
INGEST_REQUIRE_SIGNATURE = env_bool("INGEST_REQUIRE_SIGNATURE", not DEBUG)
INGEST_MAX_RETRIES = env_int("INGEST_MAX_RETRIES", 30, minimum=0)
# Retries back off exponentially up to this many seconds. A retry waits inside the worker,
# unacknowledged, so this must stay below the visibility timeout (checked below).
INGEST_RETRY_BACKOFF_MAX = env_int("INGEST_RETRY_BACKOFF_MAX", 30, minimum=1)
INGEST_MAX_ROWS = env_int("INGEST_MAX_ROWS", 200_000, minimum=1)
# Samples further than this in the future are refused (clock skew). Samples older than the
# raw retention (RAW_RETENTION_DAYS) are refused, and so are samples further than
# INGEST_MAX_SPAN_S behind their batch's newest sample (one batch reaches back at most this
# far, so it creates at most a few day partitions; a spool replay is many batches).
INGEST_MAX_FUTURE_S = env_float("INGEST_MAX_FUTURE_S", 300.0, minimum=0)
INGEST_MAX_SPAN_S = env_int("INGEST_MAX_SPAN_S", 2 * 86400, minimum=60)
# A queue item larger than this is set aside (dead-lettered) before it is parsed: parsing
# costs about ten times the message's size in memory. The default holds INGEST_MAX_ROWS
# rows of every GPU field with room to spare.
INGEST_MAX_MESSAGE_BYTES = env_int("INGEST_MAX_MESSAGE_BYTES", 64 << 20, minimum=1 << 16)
# The bulk ingest consumer (manage.py ingest_worker): the queue it reads, how many messages
# one flush takes at most (by count, and by size in Redis: huge batches stay bounded in
# memory), how many sample rows go in one transaction, and how long its liveness key lives
# (after that a dead consumer's in-flight messages are requeued by the others).
INGEST_QUEUE = env_str("INGEST_QUEUE", "ingest")
INGEST_BULK_MAX_MESSAGES = env_int("INGEST_BULK_MAX_MESSAGES", 500, minimum=1, maximum=5000)
INGEST_BULK_MAX_ROWS = env_int("INGEST_BULK_MAX_ROWS", 50_000, minimum=100)
INGEST_BULK_MAX_BYTES = env_int("INGEST_BULK_MAX_BYTES", 32 << 20, minimum=1 << 16)
INGEST_CONSUMER_TTL_S = env_int("INGEST_CONSUMER_TTL_S", 60, minimum=2)
# A job not reported by any collector for this long is considered ended.
JOB_STALE_AFTER_S = env_int("JOB_STALE_AFTER_S", 300, minimum=30)
# A node is "silent" when no batch has arrived for this long.
NODE_SILENT_AFTER_S = env_int("NODE_SILENT_AFTER_S", 120, minimum=10)
# A GPU its node has not reported for this long, while the node reported (data time), is
# gone: taken out, replaced (a new UUID), or a MIG instance destroyed. It is no longer
# counted or shown as "now" (clusterui/inventory/counting.py); its history stays.
GPU_GONE_AFTER_S = env_int("GPU_GONE_AFTER_S", 600, minimum=120)
PARTITION_DAYS_AHEAD = env_int("PARTITION_DAYS_AHEAD", 3, minimum=1, maximum=60)
# Raw GPU samples at full resolution, hot table and packed hour chunks together.
RAW_RETENTION_DAYS = env_int("RAW_RETENTION_DAYS", 14, minimum=1)
# Minutes an hour of GPU samples stays in the hot table after it closed, before compaction
# packs it (it also waits for the detectors): a batch later than that is merged into its
# chunk by the next run. And how many GPUs one compaction transaction takes.
RAW_HOT_MINUTES = env_int("RAW_HOT_MINUTES", 10, minimum=0, maximum=7 * 24 * 60)
env_retired("RAW_HOT_HOURS", "set RAW_HOT_MINUTES, the minutes a closed hour stays hot "
            "(RAW_HOT_HOURS=2 was RAW_HOT_MINUTES=120; the default is now 10)")
COMPACTION_GPUS_PER_TRANSACTION = env_int("COMPACTION_GPUS_PER_TRANSACTION", 256, minimum=1,
                                          maximum=100_000)
# Where PostgreSQL's autovacuum is off, the product vacuums a table once its dead rows pass
# this many plus this share of its live rows (autovacuum's own rule and defaults).
VACUUM_THRESHOLD_ROWS = env_int("VACUUM_THRESHOLD_ROWS", 50, minimum=0)
VACUUM_SCALE_FACTOR = env_float("VACUUM_SCALE_FACTOR", 0.2, minimum=0.0, maximum=100.0)
# Rollup retentions, from what the pages read (docs/operations.md, "Retention: what each
# page reads"). 1 minute: only ranges of 5 to 20 hours (the 6 h preset, a job of that
# length) are drawn from it; the 6 h preset ends now, inside raw retention, and an older
# range falls back to 5 minutes (series.retained_minimum): kept as long as the raw samples.
ROLLUP_1M_RETENTION_DAYS = env_int("ROLLUP_1M_RETENTION_DAYS", 14, minimum=1)
# 5 minutes: ranges of 20 hours to 12.5 days (the 24 h and 7 d presets, custom ranges, a
# job's page, the cluster history): a month back, the longest custom range (31 days).
ROLLUP_5M_RETENTION_DAYS = env_int("ROLLUP_5M_RETENTION_DAYS", 31, minimum=1)
# 1 hour: longer ranges, anything older, and the trends page's 12 months (by month: back
# to the first of the month 12 months ago, up to 396 days).
ROLLUP_1H_RETENTION_DAYS = env_int("ROLLUP_1H_RETENTION_DAYS", 400, minimum=1)

# --- Ingest log bookkeeping and the health page (clusterui/ingest/pruning.py, health.py) --
# Ingest-log rows (one per batch stored, one per batch refused) are deleted after this many
# days by the beat task prune-ingest-log, in transactions of INGEST_LOG_PRUNE_ROWS rows
# (at 100,000 GPUs and a 10 s flush the log grows by about 30 GB a day otherwise).
INGEST_LOG_RETENTION_DAYS = env_int("INGEST_LOG_RETENTION_DAYS", 7, minimum=1)
INGEST_LOG_PRUNE_ROWS = env_int("INGEST_LOG_PRUNE_ROWS", 10_000, minimum=100)
# The health page reads only this recent window of the log (gaps, refusals, drops, clocks).
INGEST_HEALTH_WINDOW_S = env_int("INGEST_HEALTH_WINDOW_S", 86_400, minimum=300,
                                 maximum=7 * 86_400)
# A node whose latest batch says it was sent this much later than it arrived has a clock
# ahead: the health page lists it (with the time refusals that usually come with it).
INGEST_CLOCK_TOLERANCE_S = env_float("INGEST_CLOCK_TOLERANCE_S", 60.0, minimum=1)

# --- Detectors (clusterui/findings; defaults and reasoning in docs/detectors.md) ------
# A job is judged over the last DETECTOR_WINDOW_S of its data, never inside its first
# DETECTOR_GRACE_S, and only once it has DETECTOR_MIN_SPAN_S of data past the grace period
# and DETECTOR_MIN_SAMPLES samples per GPU (jobstats: 10 sampling periods).
DETECTOR_WINDOW_S = env_int("DETECTOR_WINDOW_S", 3600, minimum=300, maximum=86400)
DETECTOR_GRACE_S = env_int("DETECTOR_GRACE_S", 600, minimum=0, maximum=86400)
DETECTOR_MIN_SPAN_S = env_int("DETECTOR_MIN_SPAN_S", 300, minimum=60,
                              maximum=DETECTOR_WINDOW_S)
DETECTOR_MIN_SAMPLES = env_int("DETECTOR_MIN_SAMPLES", 10, minimum=2)
# Data younger than this is left for the next pass (batches still in flight).
DETECTOR_SETTLE_S = env_int("DETECTOR_SETTLE_S", 30, minimum=0, maximum=3600)
# Ended jobs the pass never saw are finalized only if they ended this recently.
DETECTOR_FINAL_LOOKBACK_S = env_int("DETECTOR_FINAL_LOOKBACK_S", 86400, minimum=600)
# A pass adds at most this many sampling intervals of a job's backlog (1 h at 10 s), so a
# pass after a long outage stays bounded; the backlog drains over the following passes.
DETECTOR_MAX_SAMPLES_PER_PASS = env_int("DETECTOR_MAX_SAMPLES_PER_PASS", 360, minimum=60)
# An open finding closes once its condition has been gone this long (no flapping).
DETECTOR_CLOSE_AFTER_S = env_int("DETECTOR_CLOSE_AFTER_S", 600, minimum=0, maximum=86400)
# A job already finalized is judged again when samples of its lifetime arrive this late
# (default: as long as raw samples are kept, since older ones are refused anyway).
DETECTOR_LATE_HORIZON_S = env_int("DETECTOR_LATE_HORIZON_S", RAW_RETENTION_DAYS * 86400,
                                  minimum=0)
DETECTOR_LOW_UTIL_PCT = env_float("DETECTOR_LOW_UTIL_PCT", 25.0, minimum=0, maximum=100)
DETECTOR_IDLE_GPU_PCT = env_float("DETECTOR_IDLE_GPU_PCT", 5.0, minimum=0, maximum=100)
DETECTOR_WORKING_GPU_PCT = env_float("DETECTOR_WORKING_GPU_PCT", 25.0, minimum=0, maximum=100)
DETECTOR_BUSY_PCT = env_float("DETECTOR_BUSY_PCT", 50.0, minimum=0, maximum=100)
DETECTOR_COMM_TRAFFIC_PCT = env_float("DETECTOR_COMM_TRAFFIC_PCT", 60.0, minimum=1, maximum=100)
DETECTOR_COMM_TRAFFIC_SHARE = env_float("DETECTOR_COMM_TRAFFIC_SHARE", 0.5, minimum=0.05,
                                        maximum=1)
DETECTOR_COMM_CORRELATION = env_float("DETECTOR_COMM_CORRELATION", -0.5, minimum=-1,
                                      maximum=0)
DETECTOR_QUIET_NET_PCT = env_float("DETECTOR_QUIET_NET_PCT", 20.0, minimum=0, maximum=100)
DETECTOR_INPUT_CPU_PCT = env_float("DETECTOR_INPUT_CPU_PCT", 85.0, minimum=1, maximum=100)
DETECTOR_BNB_UTIL_PCT = env_float("DETECTOR_BNB_UTIL_PCT", 80.0, minimum=0, maximum=100)
DETECTOR_BNB_SM_PCT = env_float("DETECTOR_BNB_SM_PCT", 20.0, minimum=0, maximum=100)
DETECTOR_THROTTLE_SHARE = env_float("DETECTOR_THROTTLE_SHARE", 0.3, minimum=0.01, maximum=1)
DETECTOR_THROTTLE_CLOCK_PCT = env_float("DETECTOR_THROTTLE_CLOCK_PCT", 90.0, minimum=1,
                                        maximum=100)
# Stragglers in multi-node jobs: a node busier than its peers' median by this many points
# (they wait for it); a throttled node needs the peers to wait at least WAIT_GAP points; a
# node whose fabric traffic is at most FABRIC_RATIO of its peers' median, where theirs is at
# least FABRIC_MIN_PCT of capacity.
DETECTOR_STRAGGLER_BUSY_GAP_PCT = env_float("DETECTOR_STRAGGLER_BUSY_GAP_PCT", 15.0, minimum=1,
                                            maximum=100)
DETECTOR_STRAGGLER_WAIT_GAP_PCT = env_float("DETECTOR_STRAGGLER_WAIT_GAP_PCT", 5.0, minimum=0,
                                            maximum=100)
DETECTOR_STRAGGLER_FABRIC_RATIO = env_float("DETECTOR_STRAGGLER_FABRIC_RATIO", 0.5,
                                            minimum=0.01, maximum=0.99)
DETECTOR_STRAGGLER_FABRIC_MIN_PCT = env_float("DETECTOR_STRAGGLER_FABRIC_MIN_PCT", 10.0,
                                              minimum=0, maximum=100)
# An erroring port holds a job back when its node's error counters rose by
# DETECTOR_FABRIC_ERRORS or more, no peer's did, and its traffic is at most this share of
# its peers' median (the retransmissions cost it throughput).
DETECTOR_STRAGGLER_ERROR_TRAFFIC_RATIO = env_float("DETECTOR_STRAGGLER_ERROR_TRAFFIC_RATIO",
                                                   0.85, minimum=0.01, maximum=1)
# A fabric port is erroring when its error counters rose by DETECTOR_FABRIC_ERRORS or more
# over the detector window (or it downed its link once); see docs/detectors.md.
DETECTOR_FABRIC_ERRORS = env_int("DETECTOR_FABRIC_ERRORS", 10, minimum=1)
DETECTOR_WASTE_WARNING_GPU_H = env_float("DETECTOR_WASTE_WARNING_GPU_H", 2.0, minimum=0)
DETECTOR_WASTE_CRITICAL_GPU_H = env_float("DETECTOR_WASTE_CRITICAL_GPU_H", 50.0,
                                          minimum=DETECTOR_WASTE_WARNING_GPU_H)

# --- JSON API (clusterui/api, docs/api.md) -------------------------------------------
REST_FRAMEWORK = {
    # Token first: an unauthenticated request gets 401 with a WWW-Authenticate header.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "clusterui.api.tokens.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "clusterui.api.pagination.LimitOffsetPagination",
    "PAGE_SIZE": env_int("API_PAGE_SIZE", 50, minimum=1, maximum=1000),
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "clusterui.api.errors.exception_handler",
    "DATETIME_FORMAT": "iso-8601",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ClusterUI API",
    "DESCRIPTION": "GPU-cluster observability: nodes, GPUs, jobs, findings, time series and "
                   "usage. Authenticate with a session or `Authorization: Token <key>`.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "clusterui.api.schema.add_error_responses",
    ],
    # Swagger UI and Redoc from the pinned drf-spectacular-sidecar package: no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "FindingKindEnum": "clusterui.findings.choices.FindingKind",
        "FindingStateEnum": "clusterui.findings.choices.FindingState",
        "JobStateEnum": "clusterui.jobs.choices.JobState",
        "NicKindEnum": "clusterui.inventory.choices.NicKind",
    },
}
API_TOKENS_PER_USER = env_int("API_TOKENS_PER_USER", 20, minimum=1)

# --- Alert emails (clusterui/alerts, docs/operations.md "Email") ----------------------
ALERT_EMAILS_ENABLED = env_bool("ALERT_EMAILS_ENABLED", True)
# A job's owner is the Django user whose username is the job's user; when that user has no
# email (or does not exist), this pattern gives the address, e.g. "{user}@example.org".
ALERT_EMAIL_PATTERN = env_str("ALERT_EMAIL_PATTERN", "")
# Copy every finding email to ADMIN_EMAILS, and to the managers of the job's account
# ("nlp=lead@example.org,deputy@example.org;vision=v@example.org").
ALERT_NOTIFY_ADMINS = env_bool("ALERT_NOTIFY_ADMINS", False)
ALERT_ACCOUNT_MANAGERS = env_mapping("ALERT_ACCOUNT_MANAGERS")
ALERT_MIN_SEVERITY = env_choice("ALERT_MIN_SEVERITY", "warning", ("info", "warning", "critical"))
# At most this many finding emails per address and local day (the digest does not count).
ALERT_DAILY_LIMIT = env_int("ALERT_DAILY_LIMIT", 10, minimum=1)
# Emails wait (they are not dropped) during quiet hours and on days not listed (TIME_ZONE).
ALERT_QUIET_HOURS = env_time_window("ALERT_QUIET_HOURS")
ALERT_WEEKDAYS = env_weekdays("ALERT_WEEKDAYS", "mon-sun")
# The admins' daily digest goes out at the first check after this local hour.
ALERT_DIGEST_HOUR = env_int("ALERT_DIGEST_HOUR", 7, minimum=0, maximum=23)
ALERT_DIGEST_TOP = env_int("ALERT_DIGEST_TOP", 10, minimum=1, maximum=100)
# A failed SMTP send is retried after BASE, 2 x BASE, 4 x BASE ... seconds, at most MAX apart.
ALERT_RETRY_BASE_S = env_int("ALERT_RETRY_BASE_S", 60, minimum=1)
ALERT_RETRY_MAX_S = env_int("ALERT_RETRY_MAX_S", 3600, minimum=ALERT_RETRY_BASE_S)
ALERT_BATCH = env_int("ALERT_BATCH", 200, minimum=1, maximum=10_000)
ALERT_LOG_RETENTION_DAYS = env_int("ALERT_LOG_RETENTION_DAYS", 180, minimum=1)
# The job-end summary (the `clusterui jobstats` report, emailed once when ClusterUI
# finalizes a job): sent to owners who asked for it for every job, and by default for jobs
# that wasted more than this share of their allocated GPU-hours (1 = only to those who
# asked); never for jobs that ran less than JOBEND_EMAIL_MIN_RUNTIME_S.
JOBEND_EMAIL_WASTE_SHARE = env_float("JOBEND_EMAIL_WASTE_SHARE", 0.5, minimum=0, maximum=1)
JOBEND_EMAIL_MIN_RUNTIME_S = env_int("JOBEND_EMAIL_MIN_RUNTIME_S", 900, minimum=0)
# The demo's SMTP sink writes a Maildir here; set, it enables the /demo/mail/ pages.
DEMO_MAILBOX_DIR = env_str("DEMO_MAILBOX_DIR", "")

# --- Issue 14: crash-proof ingest and quiet admins -------------------------------------
# A message that was in flight in this many bulk consumers that died (SIGKILL, OOM, a crash)
# is dead-lettered with the reason "took down a consumer N times" instead of being retried.
INGEST_MAX_DELIVERIES = env_int("INGEST_MAX_DELIVERIES", 3, minimum=1)
# Django's error emails to ADMINS (a 500's traceback), off by default: errors go to the log.
# On, each distinct error (logger, place, exception type) mails at most once per
# ERROR_EMAIL_INTERVAL_S seconds (counted in the cache), without a settings dump; /healthz
# 503s never mail (a monitor polls it: an outage would mail on every probe).
ERROR_EMAILS = env_bool("ERROR_EMAILS", False)
ERROR_EMAIL_INTERVAL_S = env_int("ERROR_EMAIL_INTERVAL_S", 600, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "filters": {"not_healthz": {"()": "clusterui.errormail.NotHealthz"},
                "client_errors_one_line": {"()": "clusterui.logfilters.ClientErrorsOneLine"}},
    "handlers": {
        "stderr": {"class": "logging.StreamHandler", "formatter": "plain",
                   "filters": ["client_errors_one_line"]},
        "mail_admins": {"level": "ERROR", "class": "clusterui.errormail.RateLimitedAdminEmail",
                        "filters": ["not_healthz"], "formatter": "plain"},
    },
    "root": {"handlers": ["stderr"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # Replaces Django's default "django" logger (console + mail_admins on every error):
        # errors propagate to the root's stderr; mail only when ERROR_EMAILS is on.
        "django": {"handlers": ["mail_admins"] if ERROR_EMAILS else [], "level": "INFO"},
    },
}

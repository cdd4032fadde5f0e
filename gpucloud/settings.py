"""gpucloud settings, read from the environment (12-factor) with working development defaults.

Environment variables (all optional):
  DATABASE_URL   postgres://127.0.0.1:5432/gpucloud
  DB_TRANSACTION_POOLING  false (true when DATABASE_URL is PgBouncer in transaction pooling; ADR 1140)
  BEAT_DATABASE_URL  DATABASE_URL (beat's lock connection: straight to PostgreSQL, never a transaction pooler)
  REDIS_URL      redis://127.0.0.1:6379/0 (cache, agent last-seen batch; Celery broker and results by default)
  CELERY_BROKER_URL  REDIS_URL; or RabbitMQ, e.g. amqp://user:password@rabbitmq:5672// (docs/deployment.md)
  CELERY_RESULT_BACKEND  REDIS_URL
  SECRET_KEY     required unless DEBUG=true: at least 50 random characters (make run generates var/secret_key)
  DEBUG          false
  ALLOWED_HOSTS  * (comma separated)
  CELERY_TASK_ALWAYS_EAGER  false (tests may set it)
  SIGNUP_ENABLED false (self sign-up with e-mail verification)
  OIDC_RP_CLIENT_ID / OIDC_RP_CLIENT_SECRET / OIDC_OP_*_ENDPOINT  OIDC login, off unless set
  CONSOLE_DIST_DIR  frontend/dist (the built web console served at /)
  BEHIND_TLS_PROXY  false (true behind deploy/nginx: trust its X-Forwarded-Proto)
  PROMETHEUS_MULTIPROC_DIR  unset (web under gunicorn with several workers: where they keep their metric values)
Any of them may be given as NAME_FILE instead: the path of a file holding the value (secrets; deploy/).
"""
from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent



class _FileAwareMapping(environ.FileAwareMapping):
    """os.environ, where any variable NAME may instead be given as NAME_FILE, a file holding the value (a mounted
    secret, a systemd credential); the file's trailing newline is not part of the value."""

    def __getitem__(self, key):
        value = super().__getitem__(key)
        return value.rstrip("\r\n") if f"{key}_FILE" in self.env else value


env = environ.FileAwareEnv()
env.ENVIRON = _FileAwareMapping()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False) if (BASE_DIR / ".env").exists() else None

DEFAULT_DATABASE_URL = "postgres://127.0.0.1:5432/gpucloud"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"

DEBUG = env.bool("DEBUG", default=False)
# Required when DEBUG is false: a missing, public or weak key refuses to start (apps/core/secret_key.py).
from apps.core.secret_key import secret_key_from  # noqa: E402

SECRET_KEY = secret_key_from(env.str("SECRET_KEY", default=""), debug=DEBUG)
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["*"])

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and ReDoc files, served from the package (no CDN; SPECTACULAR_SETTINGS)
    "django_otp",
    "django_otp.plugins.otp_totp",
    "apps.core",
    "apps.audit",
    "apps.operations",
    "apps.identity",
    "apps.tenancy",
    "apps.inventory",
    "apps.scheduling",
    "apps.compute",
    "apps.reservations",
    "apps.networking",
    "apps.storage",
    "apps.baremetal",
    "apps.billing",
    "apps.health",
]

MIDDLEWARE = [
    "apps.core.middleware.RequestIdMiddleware",
    "apps.core.middleware.MetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django_otp.middleware.OTPMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "apps.core.middleware.ProblemJsonMiddleware",
]

ROOT_URLCONF = "gpucloud.urls"
WSGI_APPLICATION = "gpucloud.wsgi.application"
ASGI_APPLICATION = "gpucloud.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {"default": env.db_url("DATABASE_URL", default=DEFAULT_DATABASE_URL)}
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DB_CONN_MAX_AGE", default=60))
# The test database follows DATABASE_URL's name (test_<name>), so two checkouts with their own databases never
# share one; TEST_DATABASE_NAME overrides it.
DATABASES["default"].setdefault("TEST", {"NAME": env.str("TEST_DATABASE_NAME",
                                                         default=f"test_{DATABASES['default']['NAME']}")})
# Through PgBouncer in transaction pooling (ADR 1140) each transaction may run on another server session: no
# server-side cursors (a DECLAREd cursor lives in one session; Django's `.iterator()` then fetches in chunks).
if env.bool("DB_TRANSACTION_POOLING", default=False):
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
# Beat's singleton lock is a session-level advisory lock (gpucloud/beat.py): its connection must be a session of
# its own on PostgreSQL, so with a transaction pooler in DATABASE_URL point this straight at PostgreSQL.
BEAT_DATABASE_URL = env.str("BEAT_DATABASE_URL", default="")
# Read by prometheus_client itself when it is imported (apps/core/metrics.py); named here so it is documented.
PROMETHEUS_MULTIPROC_DIR = env.str("PROMETHEUS_MULTIPROC_DIR", default="")
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.str("REDIS_URL", default=DEFAULT_REDIS_URL)
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        # a Redis that hangs must not hang requests: cache reads (rate limits, the topology stamp) fail fast
        "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
    }
}

AUTH_USER_MODEL = "identity.User"
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend"]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
# The product serves /static/ itself (WhiteNoise): the files `collectstatic` gathered into STATIC_ROOT (the image
# does), and otherwise straight from the installed apps (the API docs' Swagger UI from drf_spectacular_sidecar),
# so the docs page works on an install without internet access or a separate web server.
WHITENOISE_USE_FINDERS = True
# The built web console (`make console` builds frontend/ into it); served at / by apps.core.console.
CONSOLE_DIST_DIR = env.str("CONSOLE_DIST_DIR", default=str(BASE_DIR / "frontend" / "dist"))

EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="gpucloud@localhost")
PUBLIC_URL = env.str("PUBLIC_URL", default=f"http://127.0.0.1:{env.str('PORT', default='8000')}")
SIGNUP_ENABLED = env.bool("SIGNUP_ENABLED", default=False)
INVITATION_MAX_AGE_SECONDS = env.int("INVITATION_MAX_AGE_SECONDS", default=7 * 24 * 3600)
# How long an Idempotency-Key answer is kept (apps.core.idempotency); after that the key is new.
IDEMPOTENCY_KEY_TTL_HOURS = env.int("IDEMPOTENCY_KEY_TTL_HOURS", default=24)
# How often Celery beat deletes the expired ones (apps.core.schedule).
IDEMPOTENCY_KEY_PURGE_INTERVAL_SECONDS = env.int("IDEMPOTENCY_KEY_PURGE_INTERVAL_SECONDS", default=3600)
# Agent heartbeats record the last-seen time in Redis; beat writes them to the database this often (seconds),
# so Host.last_heartbeat_at lags by at most this much (apps/inventory/services/last_seen.py).
AGENT_LAST_SEEN_FLUSH_SECONDS = env.int("AGENT_LAST_SEEN_FLUSH_SECONDS", default=60)
# An agent credential's row is cached (Redis) this long (seconds; 0: never), so a heartbeat reads no credential;
# a re-enrollment drops the old one's entry on commit (apps/inventory/services/agent.py, agent_authenticate).
AGENT_CREDENTIAL_CACHE_SECONDS = env.int("AGENT_CREDENTIAL_CACHE_SECONDS", default=30)
# A host whose agent has not heartbeated for this long gets a `heartbeat_lost` health event (apps.health, beat
# every 15 s); keep it well above the heartbeat interval plus the flush lag above.
HEALTH_HEARTBEAT_LOST_SECONDS = env.int("HEALTH_HEARTBEAT_LOST_SECONDS", default=300)
# Fencing a silent host before its VMs move (apps.health, ADR 0218): the driver (redfish | fake), how long its BMC
# may take to read the power back off before the fence fails (the VMs are then held), and each BMC call's timeout.
HEALTH_FENCE_DRIVER = env.str("HEALTH_FENCE_DRIVER", default="redfish")
HEALTH_FENCE_CONFIRM_SECONDS = env.int("HEALTH_FENCE_CONFIRM_SECONDS", default=120)
HEALTH_FENCE_BMC_TIMEOUT_S = env.float("HEALTH_FENCE_BMC_TIMEOUT_S", default=10.0)
# Remediation of VMs on a failed GPU or host (apps.health, docs/health.md): a project's consent mode when it set
# none (auto | propose | off) and the checkpoint notice before an auto move (seconds).
HEALTH_CONSENT_MODE_DEFAULT = env.str("HEALTH_CONSENT_MODE_DEFAULT", default="auto")
HEALTH_NOTICE_SECONDS_DEFAULT = env.int("HEALTH_NOTICE_SECONDS_DEFAULT", default=900)
# The blast-radius breaker (apps.health): within this window, at most max(MIN_HOSTS, floor(MAX_SHARE x hosts under
# a leaf switch)) hosts under it are taken out automatically; beyond that one incident names the switch.
HEALTH_BREAKER_WINDOW_SECONDS = env.int("HEALTH_BREAKER_WINDOW_SECONDS", default=900)
HEALTH_BREAKER_MAX_SHARE = env.float("HEALTH_BREAKER_MAX_SHARE", default=0.25)
HEALTH_BREAKER_MIN_HOSTS = env.int("HEALTH_BREAKER_MIN_HOSTS", default=1)
# Repair and return to service (apps.health, docs/health.md "Repair"): the check's DCGM run level; a device whose
# repairs failed this many times within the window gets an RMA record instead of another attempt; a newly enrolled
# host stays `enrolling` (out of placement) until it passed the same check (acceptance).
HEALTH_CHECK_LEVEL = env.int("HEALTH_CHECK_LEVEL", default=2)
HEALTH_RMA_AFTER_FAILED_REPAIRS = env.int("HEALTH_RMA_AFTER_FAILED_REPAIRS", default=3)
HEALTH_RMA_WINDOW_SECONDS = env.int("HEALTH_RMA_WINDOW_SECONDS", default=7 * 86400)
HOST_ACCEPTANCE_CHECK = env.bool("HOST_ACCEPTANCE_CHECK", default=True)
# Webhook destinations (apps.core.outbound): ports a tenant's URL may use, and networks an operator opens despite
# the refusal of internal addresses (CIDRs, comma separated; any port inside them).
WEBHOOK_ALLOWED_PORTS = env.list("WEBHOOK_ALLOWED_PORTS", cast=int, default=[80, 443])
WEBHOOK_ALLOWED_NETWORKS = env.list("WEBHOOK_ALLOWED_NETWORKS", default=[])

# OIDC login (mozilla-django-oidc): on only when OIDC_RP_CLIENT_ID is set; see docs/tenancy.md.
from apps.identity.oidc_config import oidc_settings  # noqa: E402

OIDC_ENABLED, _oidc = oidc_settings(env)
globals().update(_oidc)
if OIDC_ENABLED:
    AUTHENTICATION_BACKENDS = [*AUTHENTICATION_BACKENDS, "apps.identity.oidc.OIDCBackend"]
OIDC_CREATE_USER = globals().get("OIDC_CREATE_USER", False)
OIDC_MFA_AMR_VALUES = env.list("OIDC_MFA_AMR_VALUES", default=["mfa", "mca", "otp", "hwk", "sc", "swk"])
OIDC_MFA_ACR_VALUES = env.list("OIDC_MFA_ACR_VALUES", default=[])

# Sign-in security (apps/identity/signin.py, ADR 0103): staff need a second factor; changing a factor needs a
# sign-in at most this old; password and code attempts are throttled per account and per source address.
STAFF_REQUIRE_2FA = env.bool("STAFF_REQUIRE_2FA", default=True)
SIGN_IN_REAUTH_MAX_AGE_SECONDS = env.int("SIGN_IN_REAUTH_MAX_AGE_SECONDS", default=600)
SIGN_IN_THROTTLE_RATES = {
    "sign_in_account_address": env.str("SIGN_IN_RATE_PER_ACCOUNT_ADDRESS", default="10/min"),
    # account-wide, only for clients without the account's device cookie (so nobody can lock its owner out)
    "sign_in_account": env.str("SIGN_IN_RATE_PER_ACCOUNT", default="100/h"),
    "sign_in_address": env.str("SIGN_IN_RATE_PER_ADDRESS", default="30/min"),
}

SESSION_COOKIE_HTTPONLY = True
# Behind the TLS proxy (deploy/nginx/gpucloud.conf) a request is secure when the proxy says so; cookies follow.
BEHIND_TLS_PROXY = env.bool("BEHIND_TLS_PROXY", default=False)
if BEHIND_TLS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
CSRF_COOKIE_HTTPONLY = False

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.identity.authentication.BearerTokenAuthentication",
        "apps.identity.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated",
                                   "apps.identity.permissions.StaffActions"],
    "DEFAULT_FILTER_BACKENDS": ["apps.core.filters.FilterBackend"],
    "DEFAULT_PAGINATION_CLASS": "apps.core.pagination.CursorPagination",
    "DEFAULT_PARSER_CLASSES": [
        "apps.core.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "apps.core.schema.AutoSchema",
    "EXCEPTION_HANDLER": "apps.core.errors.problem_exception_handler",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "gpucloud API",
    "DESCRIPTION": "Control plane for GPU clouds: tenancy, fleet, placement, compute, networking, leases, billing.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    # request bodies are documented as JSON only (forms are accepted for the browsable API, not an interface)
    "PARSER_WHITELIST": ["apps.core.parsers.JSONParser", "rest_framework.parsers.JSONParser",
                         "apps.inventory.api.views.YamlDocumentParser"],
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "apps.core.schema.problem_responses"],
    # /api/v1/docs/ loads Swagger UI from this origin (drf-spectacular-sidecar under /static/), never from a CDN
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},  # no badge fetched from validator.swagger.io
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # the health event kinds get their own component name (a second `kind` choice set would rename KindEnum)
    "ENUM_NAME_OVERRIDES": {"HealthEventKindEnum": "apps.health.states.EventKind",
                            "KindEnum": "apps.inventory.states.CommandKind"},
}

# Billing: usage is metered in pieces that never cross this period (seconds); see apps/billing/conf.py.
BILLING_METERING_PERIOD_SECONDS = env.int("BILLING_METERING_PERIOD_SECONDS", default=3600)
# Organizations per invoice-run transaction (and per step of an API-requested run).
BILLING_RUN_BATCH_SIZE = env.int("BILLING_RUN_BATCH_SIZE", default=2000)
# The seller on invoice and credit-note PDFs (in the address, a literal "\n" starts a new line); the days from an
# invoice's finalization to its due date.
BILLING_SELLER_NAME = env.str("BILLING_SELLER_NAME", default="gpucloud")
BILLING_SELLER_ADDRESS = env.str("BILLING_SELLER_ADDRESS", default="").replace("\\n", "\n")
BILLING_SELLER_TAX_ID = env.str("BILLING_SELLER_TAX_ID", default="")
BILLING_SELLER_EMAIL = env.str("BILLING_SELLER_EMAIL", default="")
BILLING_SELLER_COUNTRY = env.str("BILLING_SELLER_COUNTRY", default="")
BILLING_PAYMENT_TERMS_DAYS = env.int("BILLING_PAYMENT_TERMS_DAYS", default=30)
# The TrueType fonts of invoice and credit-note PDFs (Debian's fonts-dejavu-core by default; `manage.py check`
# reports billing.E001 when one is missing).
BILLING_PDF_FONT = env.str("BILLING_PDF_FONT", default="/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
BILLING_PDF_FONT_BOLD = env.str("BILLING_PDF_FONT_BOLD",
                                default="/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf")

# Bare metal (apps/baremetal/conf.py, docs/bare-metal.md): Ironic's API; Fernet keys for BMC credentials
# (comma-separated, newest first) and the Ed25519 seed that signs exit receipts (urlsafe base64), both derived
# from SECRET_KEY when unset (development only)
BAREMETAL_IRONIC_ENDPOINT = env.str("BAREMETAL_IRONIC_ENDPOINT", default="http://127.0.0.1:6385")
BAREMETAL_CREDENTIALS_KEYS = env.str("BAREMETAL_CREDENTIALS_KEYS", default="")
BAREMETAL_RECEIPT_SIGNING_KEY = env.str("BAREMETAL_RECEIPT_SIGNING_KEY", default="")
BAREMETAL_DEPLOY_POLL_S = env.float("BAREMETAL_DEPLOY_POLL_S", default=2.0)
# `manage.py demo_load` enrolls the demo bare-metal hosts into Ironic only when the run starts one (scripts/run.sh)
BAREMETAL_DEMO_ENROLL = env.bool("BAREMETAL_DEMO_ENROLL", default=False)

# Celery: queues default, provisioning, reconcile, billing; beat schedule collected from the apps
# (each app may define BEAT_SCHEDULE in apps/<app>/schedule.py; see gpucloud/celery.py).
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=REDIS_URL)
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
# Sending a task happens in the request after commit: bound it, so a broker that is down or hangs costs the
# client at most about connect + read timeout (1 s + 2 s) once, and the committed work is sent again by the
# operations resumer and the periodic reconciles (apps.core.tasks).
CELERY_BROKER_CONNECTION_TIMEOUT = env.float("CELERY_BROKER_CONNECTION_TIMEOUT", default=1.0)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": CELERY_BROKER_CONNECTION_TIMEOUT,
    "socket_timeout": env.float("CELERY_BROKER_SOCKET_TIMEOUT", default=2.0),
}
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_QUEUES = ("default", "provisioning", "reconcile", "billing")
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = "UTC"
# Beat runs its schedule in one process only (a PostgreSQL advisory lock; gpucloud/beat.py, ADR 1100): a second
# beat started by mistake, or kept as a standby, sends nothing and takes over within this many seconds.
CELERY_BEAT_SCHEDULER = "gpucloud.beat:SingletonScheduler"
BEAT_STANDBY_RETRY_SECONDS = env.float("BEAT_STANDBY_RETRY_SECONDS", default=5.0)

from apps.core.logging import configure_logging, log_handlers  # noqa: E402

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {
            "()": "structlog.stdlib.ProcessorFormatter",
            "processor": "structlog.processors.JSONRenderer",
            "foreign_pre_chain": [
                "structlog.contextvars.merge_contextvars",
                "structlog.processors.TimeStamper",
                "structlog.stdlib.add_log_level",
                "structlog.stdlib.add_logger_name",
            ],
        }
    },
    "filters": {"request_id": {"()": "apps.core.logging.RequestIdFilter"}},
    "handlers": log_handlers(env.str("LOG_FILE", default="")),
    "root": {"handlers": ["main"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"django.server": {"level": "WARNING"}, "django.request": {"level": "ERROR"}},
}

LOGGING = configure_logging(LOGGING)

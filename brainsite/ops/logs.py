"""Log lines for operators: a UTC timestamp, the level, the logger, the request id (the one
responses carry in X-Request-Id, "-" outside a request) and the message. `brain.request` writes
one line per request (brainsite.ops.middleware.RequestLogMiddleware); django.request's own
lines for client errors (4xx, with the traceback of the Http404 or PermissionDenied behind them)
are dropped, and a request that failed because the database is away is one line, not a
traceback."""

import logging
import time

DATABASE_AWAY = "database unavailable"


class UTCFormatter(logging.Formatter):
    converter = time.gmtime
    default_time_format = "%Y-%m-%dT%H:%M:%S"
    default_msec_format = "%s.%03dZ"


class RequestIdFilter(logging.Filter):
    def filter(self, record):
        if not getattr(record, "request_id", None):
            try:
                from knowledge.audit.services import current_request_id

                record.request_id = current_request_id.get() or "-"
            except Exception:  # logging before Django's apps are ready
                record.request_id = "-"
        return True


class RequestErrorFilter(logging.Filter):
    """For django.request: no line for a client error, one line for a database outage."""

    def filter(self, record):
        status = getattr(record, "status_code", None)
        if status is not None and status < 500:
            return False
        from brainsite.ops.errors import is_database_away

        if record.exc_info and is_database_away(record.exc_info[1]):
            record.msg = (
                f"{record.getMessage()}: {DATABASE_AWAY}: {str(record.exc_info[1]).splitlines()[0][:200]}"
            )
            record.args = ()
            record.exc_info = record.exc_text = None
        return True


def logging_config(level: str) -> dict:
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {
            "request_id": {"()": "brainsite.ops.logs.RequestIdFilter"},
            "request_errors": {"()": "brainsite.ops.logs.RequestErrorFilter"},
        },
        "formatters": {
            "brain": {
                "()": "brainsite.ops.logs.UTCFormatter",
                "format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s",
            }
        },
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": "brain", "filters": ["request_id"]}
        },
        "root": {"handlers": ["console"], "level": level},
        "loggers": {
            "django.request": {"filters": ["request_errors"]},
            "brain.request": {"level": "INFO"},
            "brain.worker": {"level": "INFO"},
            "brain.model": {"level": "INFO"},  # one line per model call (knowledge/llm/client.py)
        },
    }

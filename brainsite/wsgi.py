import os

from django.core.wsgi import get_wsgi_application

from brainsite.ops.tracing import tracing_setup

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "brainsite.settings")
tracing_setup()  # off unless the OTEL_* variables ask for an exporter
application = get_wsgi_application()

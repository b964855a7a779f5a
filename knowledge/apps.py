from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge"

    def ready(self):
        from knowledge import schema  # noqa: F401  (registers the OpenAPI auth extension)

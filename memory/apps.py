from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self):
        from memory.reconciler.selectors import reconciler_alerts, reconciler_status
        from memory.skills.restore import register
        from memory.status import StatusSection, status_section_register

        register()
        status_section_register(
            StatusSection(
                name="reconciler",
                template="memory/_status_reconciler.html",
                report=reconciler_status,
                alerts=reconciler_alerts,
            )
        )

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self):
        from memory.skills.restore import register

        register()

from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self):
        from knowledge.memories import activation_register
        from memory.lifecycle.services import memory_activate
        from memory.skills.restore import register

        register()
        activation_register(memory_activate)

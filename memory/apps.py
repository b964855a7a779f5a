from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self):
        from knowledge.memories.activation import activation_register
        from memory.lifecycle.activation import activate
        from memory.skills.restore import register

        register()
        activation_register(activate=activate)

        from memory import jobs

        jobs.register()

        from knowledge.signals import material_changed

        def _recheck(sender, actor, refs, **kwargs):
            from memory.provenance.services import provenance_recheck_materials

            provenance_recheck_materials(actor=actor, refs=refs)

        material_changed.connect(_recheck, dispatch_uid="memory.recheck_materials", weak=False)

        from knowledge.signals import content_erased
        from memory.provenance.erased import derived_of_erased_drop

        def _erased(sender, **kwargs):
            derived_of_erased_drop(**kwargs)

        content_erased.connect(_erased, dispatch_uid="memory.drop_derived_of_erased", weak=False)

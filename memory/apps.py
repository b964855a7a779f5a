from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self):
        from memory.skills.restore import register

        register()

        from knowledge.signals import material_changed

        def _recheck(sender, actor, refs, **kwargs):
            from memory.provenance import provenance_recheck_materials

            provenance_recheck_materials(actor=actor, refs=refs)

        material_changed.connect(_recheck, dispatch_uid="memory.recheck_materials", weak=False)

        from knowledge.materials.selectors import materials_alerts, materials_status
        from memory.status import StatusSection, status_section_register

        status_section_register(
            StatusSection(
                name="materials",
                template="knowledge/materials/_status.html",
                report=materials_status,
                alerts=materials_alerts,
            )
        )

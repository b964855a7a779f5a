from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    verbose_name = "Memory"

    def ready(self):
        from memory.reconciler.selectors import reconciler_alerts, reconciler_status
        from memory.skills.restore import register
        from memory.status import StatusSection, status_section_register

        register()

        from knowledge.signals import material_changed

        def _recheck(sender, actor, refs, **kwargs):
            from memory.provenance import provenance_recheck_materials

            provenance_recheck_materials(actor=actor, refs=refs)

        material_changed.connect(_recheck, dispatch_uid="memory.recheck_materials", weak=False)

        from knowledge.materials.selectors import materials_alerts, materials_status

        status_section_register(
            StatusSection(
                name="materials",
                template="knowledge/materials/_status.html",
                report=materials_status,
                alerts=materials_alerts,
            )
        )
        status_section_register(
            StatusSection(
                name="reconciler",
                template="memory/_status_reconciler.html",
                report=reconciler_status,
                alerts=reconciler_alerts,
            )
        )

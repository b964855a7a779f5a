from django.apps import AppConfig


class CurationConfig(AppConfig):
    name = "curation"
    verbose_name = "Curation"

    def ready(self):
        from curation.dreaming.selectors import stage_a_alerts, stage_a_status
        from curation.dreaming.selectors_b import stage_b_alerts, stage_b_status
        from curation.receivers import connect
        from curation.status.selectors import StatusSection, status_section_register
        from knowledge.materials.selectors import materials_alerts, materials_status
        from memory.lifecycle.selectors import conflicts_alerts, conflicts_status
        from memory.reconciler.selectors import reconciler_alerts, reconciler_status

        connect()
        from curation.dreaming import jobs

        jobs.register()
        from curation.materials.learn import LEARNER
        from knowledge.materials.learning import learner_register

        learner_register(LEARNER)
        status_section_register(
            StatusSection(
                name="dreaming_stage_a",
                template="curation/dreaming/_status_stage_a.html",
                report=stage_a_status,
                alerts=stage_a_alerts,
            )
        )
        status_section_register(
            StatusSection(
                name="dreaming_stage_b",
                template="curation/dreaming/_status_stage_b.html",
                report=stage_b_status,
                alerts=stage_b_alerts,
            )
        )
        from curation.model_status import models_alerts, models_status

        status_section_register(
            StatusSection(
                name="models",
                template="curation/_status_models.html",
                report=models_status,
                alerts=models_alerts,
            )
        )
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
                template="memory/reconciler/_status.html",
                report=reconciler_status,
                alerts=reconciler_alerts,
            )
        )
        status_section_register(
            StatusSection(
                name="conflicts",
                template="memory/lifecycle/_status_conflicts.html",
                report=conflicts_status,
                alerts=conflicts_alerts,
            )
        )

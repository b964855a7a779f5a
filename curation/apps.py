from django.apps import AppConfig


class CurationConfig(AppConfig):
    name = "curation"
    verbose_name = "Curation"

    def ready(self):
        from curation.receivers import connect

        connect()
        from curation.dreaming import jobs

        jobs.register()
        from curation.materials.learn import LEARNER
        from knowledge.materials.learning import learner_register

        learner_register(LEARNER)

from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge"

    def ready(self):
        from axes.signals import user_locked_out
        from django.contrib.auth.signals import user_login_failed

        from knowledge import schema  # noqa: F401  (registers the OpenAPI auth extension)
        from knowledge.principals import throttle

        user_login_failed.connect(throttle.on_login_failed, dispatch_uid="brain-login-failed")
        user_locked_out.connect(throttle.on_locked_out, dispatch_uid="brain-locked-out")

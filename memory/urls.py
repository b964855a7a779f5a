from django.urls import path  # noqa: F401

urlpatterns = []

api_urlpatterns = []

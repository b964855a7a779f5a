from django.urls import path

from knowledge.erasure import api

urlpatterns: list = []

api_urlpatterns = [
    path("erasures", api.erasure_create, name="api-erasures"),
]

from django.urls import path

from curation.search import views

urlpatterns = [
    path("search/", views.search_page, name="search"),
]

api_urlpatterns = []

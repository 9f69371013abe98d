from django.urls import path

from clusterui.ingest import views

urlpatterns = [
    path("ingest/health/", views.ingest_health, name="ingest-health"),
]

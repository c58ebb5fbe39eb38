from django.urls import path

from . import mlflow_views

# MLFLOW_TRACKING_URI=http://HOST/mlflow: the client appends /api/2.0/mlflow/<endpoint>
urlpatterns = [
    path("api/2.0/mlflow/<path:endpoint>", mlflow_views.mlflow_api),
    path("ajax-api/2.0/mlflow/<path:endpoint>", mlflow_views.mlflow_api),
    path("api/2.0/mlflow-artifacts/<path:path>", mlflow_views.not_stored),
    path("api/3.0/<path:path>", mlflow_views.not_stored),
    path("<path:path>", mlflow_views.unknown),
]

from django.urls import path

from . import mlflow_views, views

# MLFLOW_TRACKING_URI=http://HOST/mlflow: the client appends /api/2.0/mlflow/<endpoint>
urlpatterns = [
    path("api/2.0/mlflow/<path:endpoint>", mlflow_views.mlflow_api),
    path("ajax-api/2.0/mlflow/<path:endpoint>", mlflow_views.mlflow_api),
    path("api/2.0/mlflow-artifacts/artifacts", mlflow_views.artifact_service),
    path("api/2.0/mlflow-artifacts/artifacts/<path:path>", mlflow_views.artifact_service),
    path("api/2.0/mlflow-artifacts/<path:path>", mlflow_views.not_stored),
    path("api/3.0/<path:path>", mlflow_views.not_stored),
    path("get-artifact", mlflow_views.get_artifact),
    # the links the MLflow client prints ("View run ... at: HOST/mlflow/#/experiments/1/runs/<id>")
    path("", views.mlflow_link, name="mlflow_link"),
    path("runs/<str:mlflow_run_id>/", views.run_by_mlflow_id, name="run_by_mlflow_id"),
    path("experiments/<id:experiment_id>/", views.experiment_runs, name="experiment_runs"),
    path("<path:path>", mlflow_views.unknown),
]

from django.urls import path

from webapp.prompts import api_views as prompts
from webapp.runs import api_views as runs

urlpatterns = [
    path("prompt-sets", prompts.prompt_sets),
    path("prompt-sets/<int:pk>", prompts.prompt_set_detail),
    path("methods", runs.methods),
    path("runs", runs.runs),
    path("runs/<int:pk>", runs.run_detail),
    path("runs/<int:pk>/cancel", runs.run_cancel),
    path("runs/<int:pk>/resume", runs.run_resume),
    path("runs/<int:pk>/clone", runs.run_clone),
    path("runs/<int:pk>/metrics", runs.run_metrics),
    path("runs/<int:pk>/rollouts", runs.run_rollouts),
    path("runs/<int:pk>/groups/<int:step>/<str:prompt_id>", runs.run_group),
    path("runs/<int:pk>/rzero/<int:iteration>/questions", runs.run_rzero_questions),
]

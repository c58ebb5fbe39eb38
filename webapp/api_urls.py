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
    path("runs/<int:pk>/metrics/export", runs.run_metrics_export),
    path("compare", runs.compare),
    path("runs/<int:pk>/rollouts", runs.run_rollouts),
    path("runs/<int:pk>/rollouts/search", runs.run_rollout_search),
    path("runs/<int:pk>/rollouts/export", runs.run_rollouts_export),
    path("runs/<int:pk>/groups/<int:step>/<str:prompt_id>", runs.run_group),
    path("runs/<int:pk>/prompts/<path:prompt_id>/history", runs.run_prompt_history),
    path("runs/<int:pk>/rzero/<int:iteration>/questions", runs.run_rzero_questions),
]

from webapp.alerts import api_views as alerts  # noqa: E402

urlpatterns += [
    path("teams", alerts.teams),
    path("teams/<int:pk>", alerts.team_detail),
    path("teams/<int:pk>/webhooks", alerts.webhooks),
    path("teams/<int:pk>/webhooks/<int:hook_id>", alerts.webhook_detail),
    path("teams/<int:pk>/alert-rules", alerts.alert_rules),
    path("alerts", alerts.alerts),
    path("alerts/<int:pk>/acknowledge", alerts.acknowledge),
    path("alerts/<int:pk>/resolve", alerts.resolve),
    path("runs/<int:pk>/alerts", alerts.run_alerts),
]

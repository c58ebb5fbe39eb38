from django.urls import path

from webapp.api import by_method
from webapp.explorer import api_views as explorer
from webapp.external import api_views as external
from webapp.prompts import api_views as prompts
from webapp.runs import api_views as runs

urlpatterns = [
    path("prompt-sets", prompts.prompt_sets),
    path("prompt-sets/<id:pk>", prompts.prompt_set_detail),
    path("prompt-uploads/<id:pk>", prompts.prompt_upload_detail),
    path("methods", runs.methods),
    path("runs", runs.runs),
    path("runs/<id:pk>", runs.run_detail),
    path("runs/<id:pk>/cancel", runs.run_cancel),
    path("runs/<id:pk>/resume", runs.run_resume),
    path("runs/<id:pk>/clone", runs.run_clone),
    path("runs/<id:pk>/transitions", runs.run_transitions),
    path("runs/<id:pk>/live-state", runs.run_live_state),
    path("runs/<id:pk>/alerts", runs.run_alerts),
    # a run's metrics: read (any run), imported from a logger's files (a run trained elsewhere: evolab sync)
    path("runs/<id:pk>/metrics", by_method(GET=runs.run_metrics, POST=external.post_metrics)),
    path("runs/<id:pk>/metrics/export", explorer.run_metrics_export),
    path("compare", runs.compare),
    # a run's rollouts: read (any run), reported (a run trained elsewhere, DESIGN §4.8)
    path("runs/<id:pk>/rollouts", by_method(GET=explorer.run_rollouts, POST=external.post_rollouts)),
    path("runs/<id:pk>/rollouts/search", explorer.run_rollout_search),
    path("runs/<id:pk>/rollouts/export", explorer.run_rollouts_export),
    path("runs/<id:pk>/groups/<id:step>/<str:prompt_id>", explorer.run_group),
    path("runs/<id:pk>/prompts/<path:prompt_id>/history", explorer.run_prompt_history),
    path("runs/<id:pk>/rzero/<id:iteration>/questions", runs.run_rzero_questions),
]

from webapp.alerts import api_views as alerts  # noqa: E402

urlpatterns += [
    path("teams", alerts.teams),
    path("teams/<id:pk>", alerts.team_detail),
    path("teams/<id:pk>/webhooks", alerts.webhooks),
    path("teams/<id:pk>/webhooks/<id:hook_id>", alerts.webhook_detail),
    path("teams/<id:pk>/alert-rules", alerts.alert_rules),
    path("teams/<id:pk>/alerts/acknowledge", alerts.acknowledge_several),
    path("alerts", alerts.alerts),
    path("alerts/<id:pk>/acknowledge", alerts.acknowledge),
    path("alerts/<id:pk>/resolve", alerts.resolve),
]

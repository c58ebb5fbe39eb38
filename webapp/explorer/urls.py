from django.urls import path

from . import views

app_name = "explorer"
urlpatterns = [
    path("runs/<id:pk>/rollouts/", views.run_rollouts, name="rollouts"),
    path("runs/<id:pk>/rollouts/search/", views.rollout_search_page, name="rollout_search"),
    path("runs/<id:pk>/prompts/<path:prompt_id>/", views.prompt_history_page, name="prompt_history"),
]

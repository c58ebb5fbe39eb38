from django.urls import path

from . import backtest_views, views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("runs/new/", views.run_new, name="new"),
    path("compare/", views.compare, name="compare"),
    path("runs/<id:pk>/", views.run_detail, name="detail"),
    path("runs/<id:pk>/questions/", views.run_questions, name="questions"),
    path("runs/<id:pk>/<str:action>/", views.run_action, name="action"),
    # beside the team's alert pages (webapp/alerts/urls.py); here because it reads the team's runs
    path("teams/<id:pk>/alerts/backtest/", backtest_views.team_backtest, name="team_backtest"),
]

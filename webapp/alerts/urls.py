from django.urls import path

from . import views

app_name = "alerts"
urlpatterns = [  # under /teams/, beside the team pages (webapp/accounts/urls.py)
    path("<id:pk>/alerts/", views.team_alerts, name="team_alerts"),
    path("<id:pk>/alert-settings/", views.team_settings, name="team_settings"),
]

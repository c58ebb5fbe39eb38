from django.urls import path

from . import views

app_name = "teams"
urlpatterns = [
    path("", views.team_list, name="list"),
    path("switch/", views.switch, name="switch"),
    path("<int:pk>/", views.team_detail, name="detail"),
    path("<int:pk>/alerts/", views.team_alerts, name="alerts"),
]

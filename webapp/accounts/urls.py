from django.urls import path

from webapp.numbers import register_id_converter

from . import views

register_id_converter()  # <id:pk>: at most 18 digits (webapp/numbers.py)

app_name = "teams"
urlpatterns = [
    path("", views.team_list, name="list"),
    path("switch/", views.switch, name="switch"),
    path("<id:pk>/", views.team_detail, name="detail"),
    path("<id:pk>/alerts/", views.team_alerts, name="alerts"),
]

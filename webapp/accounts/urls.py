from django.urls import path

from . import views

app_name = "teams"
urlpatterns = [
    path("", views.team_list, name="list"),
    path("switch/", views.switch, name="switch"),
    path("join/<str:key>/", views.join, name="join"),
    path("<id:pk>/", views.team_detail, name="detail"),
]

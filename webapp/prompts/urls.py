from django.urls import path

from . import views

app_name = "prompts"
urlpatterns = [
    path("", views.prompt_set_list, name="list"),
    path("<id:pk>/", views.prompt_set_detail, name="detail"),
    path("uploads/<id:pk>/", views.prompt_upload, name="upload"),
]

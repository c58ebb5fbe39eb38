from django.urls import path

from webapp.numbers import register_id_converter

from . import views

register_id_converter()  # <id:pk>: at most 18 digits (webapp/numbers.py)

app_name = "prompts"
urlpatterns = [
    path("", views.prompt_set_list, name="list"),
    path("<id:pk>/", views.prompt_set_detail, name="detail"),
    path("uploads/<id:pk>/", views.prompt_upload, name="upload"),
]

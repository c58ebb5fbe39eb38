from django.urls import path

from webapp.numbers import register_id_converter
from webapp.runs.consumers import RunConsumer, TeamConsumer

register_id_converter()

websocket_urlpatterns = [
    path("ws/runs/<id:pk>/", RunConsumer.as_asgi()),
    path("ws/teams/<id:pk>/", TeamConsumer.as_asgi()),
]

from django.urls import path

from webapp.runs.consumers import RunConsumer, TeamConsumer

websocket_urlpatterns = [
    path("ws/runs/<id:pk>/", RunConsumer.as_asgi()),
    path("ws/teams/<id:pk>/", TeamConsumer.as_asgi()),
]

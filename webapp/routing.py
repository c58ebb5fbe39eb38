from django.urls import path

from webapp.runs.consumers import RunConsumer, TeamConsumer

websocket_urlpatterns = [
    path("ws/runs/<int:pk>/", RunConsumer.as_asgi()),
    path("ws/teams/<int:pk>/", TeamConsumer.as_asgi()),
]

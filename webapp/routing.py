from django.urls import path

from webapp.runs.consumers import RunConsumer

websocket_urlpatterns = [path("ws/runs/<int:pk>/", RunConsumer.as_asgi())]

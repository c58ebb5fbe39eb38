from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from workers.live import run_group_name

from .models import Run


class RunConsumer(AsyncJsonWebsocketConsumer):
    """ws/runs/{id}/: forwards the run's live messages, one JSON frame each.

    The page renders what the database holds first, then applies these; a message can
    therefore repeat a point the page already has, and the client ignores steps it has."""

    async def connect(self):
        user = self.scope.get("user")
        self.run_id = int(self.scope["url_route"]["kwargs"]["pk"])
        if user is None or not user.is_authenticated or not await self._run_exists():
            await self.close(code=4403)
            return
        self.group = run_group_name(self.run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def run_messages(self, event):
        for message in event["messages"]:
            await self.send_json(message)

    @database_sync_to_async
    def _run_exists(self):
        return Run.objects.filter(pk=self.run_id).exists()

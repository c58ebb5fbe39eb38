from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from webapp.accounts.models import Team
from webapp.live import run_group_name, team_group_name

from .models import Run

# Close codes: 4401 not signed in; 4404 nothing visible there (another team's object
# answers exactly like one that does not exist, DESIGN §4.4).
NOT_SIGNED_IN, NOT_FOUND = 4401, 4404


class _GroupConsumer(AsyncJsonWebsocketConsumer):
    """Accepts a signed-in user who may see the object, then forwards the group's live
    messages, one JSON frame each, or with ?batch=1 each poll's messages as one
    `{"type": "batch", "messages": [...]}` frame."""

    async def connect(self):
        # ?batch=1 (the run page asks for it): a poll's messages arrive as one frame
        self.batched = b"batch=1" in self.scope.get("query_string", b"").split(b"&")
        user = self.scope.get("user")
        self.pk = int(self.scope["url_route"]["kwargs"]["pk"])
        if user is None or not user.is_authenticated:
            return await self._refuse(NOT_SIGNED_IN)
        if not await self._visible(user):
            return await self._refuse(NOT_FOUND)
        self.group = self.group_name()
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def _refuse(self, code):
        # Closing before the handshake completes reaches the client as a bare HTTP 403;
        # accepting first lets it read the close code (4401, 4404) the contract promises.
        await self.accept()
        await self.close(code=code)

    async def disconnect(self, code):
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def run_messages(self, event):
        # frames encoded once by the sender (webapp/live.py), one JSON message each
        frames = event["frames"]
        if self.batched and len(frames) > 1:
            # one frame for the whole poll: a 400-step catch-up to 50 viewers was 20,000 sends from the
            # one event loop (p95 506 ms); joined as text, nothing is decoded or encoded again
            await self.send(text_data='{"type": "batch", "messages": [' + ", ".join(frames) + "]}")
            return
        for frame in frames:
            await self.send(text_data=frame)


class RunConsumer(_GroupConsumer):
    """ws/runs/{id}/. The page renders what the database holds first, then applies these;
    a message can therefore repeat a point the page already has, and the client ignores
    steps it has."""

    def group_name(self):
        return run_group_name(self.pk)

    @database_sync_to_async
    def _visible(self, user):
        return Run.objects.visible_to(user).filter(pk=self.pk).exists()


class TeamConsumer(_GroupConsumer):
    """ws/teams/{id}/: the team's alerts and its runs' state changes (run list, alerts page)."""

    def group_name(self):
        return team_group_name(self.pk)

    @database_sync_to_async
    def _visible(self, user):
        return Team.objects.of(user).filter(pk=self.pk).exists()

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.contrib.auth import get_user_model

from webapp.accounts.models import ApiToken, Team
from webapp.live import BEHIND_FRAME, Hub, team_group_name, user_group_name

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
        if not await database_sync_to_async(self.visible)(user):
            return await self._refuse(NOT_FOUND)
        self.user_group = user_group_name(user.pk)
        await self.join()
        await self.channel_layer.group_add(self.user_group, self.channel_name)
        await self.accept()

    async def _refuse(self, code):
        # Closing before the handshake completes reaches the client as a bare HTTP 403;
        # accepting first lets it read the close code (4401, 4404) the contract promises.
        await self.accept()
        await self.close(code=code)

    async def join(self):
        self.group = self.group_name()
        await self.channel_layer.group_add(self.group, self.channel_name)

    async def leave(self):
        await self.channel_layer.group_discard(self.group, self.channel_name)

    async def disconnect(self, code):
        if hasattr(self, "user_group"):
            await self.leave()
            await self.channel_layer.group_discard(self.user_group, self.channel_name)

    async def access_changed(self, event):
        """The user's access changed (webapp/live.py::access_changed_on_commit): stay open only if the
        socket would be accepted now."""
        session = self.scope.get("session")
        signing_out = event.get("signed_out_session")
        if signing_out and session is not None and session.session_key == signing_out:
            return await self.close(code=NOT_SIGNED_IN)  # its row is deleted just after the signal
        code = await self._still_allowed()
        if code is not None:
            await self.close(code=code)

    @database_sync_to_async
    def _still_allowed(self):
        """None when the socket may stay open, else the close code it gets."""
        key = self.scope.get("token_key")
        user = (ApiToken.user_for_key(key) if key is not None else
                get_user_model().objects.filter(pk=self.scope["user"].pk, is_active=True).first())
        if user is None or user.pk != self.scope["user"].pk:  # revoked token, deactivated or deleted account
            return NOT_SIGNED_IN
        session = self.scope.get("session")
        if key is None and session is not None and not session.exists(session.session_key):  # that browser signed out
            return NOT_SIGNED_IN
        return None if self.visible(user) else NOT_FOUND

    async def run_messages(self, event):
        # frames encoded once by the sender (webapp/live.py), one JSON message each
        await self.send_frames(event["frames"])

    async def send_frames(self, frames):
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
    steps it has. The run's messages come from its stream through the process's `Hub` (webapp/live.py), not
    the channel layer: a burst of pushes overflowed the layer's per-process queue (issue 26)."""

    async def join(self):
        self.hub = Hub.of_this_loop()
        await self.hub.watch(self.pk, self)

    async def leave(self):
        self.hub.unwatch(self.pk, self)

    async def live_frames(self, frames, behind):
        """The Hub's entries for this socket, in order; `behind` when some it should have had were trimmed
        from the stream first: it is told before the rest, and the client re-reads what it missed."""
        await self.send_frames([BEHIND_FRAME, *frames] if behind else frames)

    def visible(self, user) -> bool:
        return Run.objects.visible_to(user).filter(pk=self.pk).exists()


class TeamConsumer(_GroupConsumer):
    """ws/teams/{id}/: the team's alerts and its runs' state changes (run list, alerts page)."""

    def group_name(self):
        return team_group_name(self.pk)

    def visible(self, user) -> bool:
        return Team.objects.of(user).filter(pk=self.pk).exists()

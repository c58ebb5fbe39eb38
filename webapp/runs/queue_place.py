"""Where a queued run waits (issue 40): its place in its worker queue, the runs in front of it, and about how long
until a worker takes it, as the run page and the run list say it ("2nd in the cpu queue, behind run 1, ~9 min").

The queue is shared by every team: a run of another team in front is counted, never named (DESIGN §4.4). The wait
is estimated by playing the queue forward on the workers' slots (health.queue_slots): each run in front holds a
slot for its remaining steps at its own pace (a running run's seconds per step so far) or, not started, at the pace
of the queue's recent runs of the same method. No estimate while a pace or the slots are unknown."""
import heapq
import statistics
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone

from .health import queue_slots
from .models import Run

# runs on a queue that hold one of its workers' slots: a cluster engine's job is supervised by the worker that
# submitted it while the engine holds it (pending) and while it trains
HOLDING = (Run.PENDING, Run.RUNNING)
RECENT_RUNS = 10  # the queue's latest runs of a method whose pace estimates a run not started yet


@dataclass
class QueuePlace:
    queue: str  # as the user names it (without EVOLAB_QUEUE_PREFIX)
    position: int  # 1: the next queued run a worker takes
    ahead: list[int] = field(default_factory=list)  # the runs in front that this user may see: running, then queued
    others: int = 0  # runs in front of other teams
    eta_seconds: float | None = None

    @property
    def text(self) -> str:
        place = f"{ordinal(self.position)} in the {self.queue} queue"
        if self.ahead or self.others:
            named = [f"run {self.ahead[0]}"] if len(self.ahead) == 1 else (
                [f"runs {', '.join(map(str, self.ahead))}"] if self.ahead else [])
            if self.others:
                named.append(f"{self.others} run{'s' if self.others > 1 else ''} of other teams")
            place += ", behind " + " and ".join(named)
        if self.eta_seconds is not None:
            place += ", " + about(self.eta_seconds)
        return place

    def to_json(self) -> dict:
        return {"queue": self.queue, "position": self.position, "ahead": self.ahead, "others": self.others,
                "eta_seconds": None if self.eta_seconds is None else round(self.eta_seconds), "text": self.text}


def ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def about(seconds: float) -> str:
    """~9 min, ~1 h 5 min; under a minute: "starting within a minute"."""
    minutes = round(seconds / 60)
    if minutes < 1:
        return "starting within a minute"
    if minutes < 60:
        return f"~{minutes} min"
    return f"~{minutes // 60} h" + (f" {minutes % 60} min" if minutes % 60 else "")


def places(runs, user) -> dict[int, QueuePlace]:
    """{run id: QueuePlace} for the runs of `runs` waiting in a worker queue, in a few queries whatever their number
    (the run list's rows)."""
    waiting = [r for r in runs if r.state == Run.QUEUED and not r.is_external]
    if not waiting:
        return {}
    queues = {r.queue for r in waiting}
    active = list(Run.objects.filter(queue__in=queues, deleted_at__isnull=True, source=Run.EVOLAB,
                                     state__in=(Run.QUEUED, *HOLDING))
                  .annotate(waiting_since=Coalesce(F("dispatched_at"), F("created_at")))
                  .order_by("waiting_since", "pk"))
    visible = set(Run.objects.visible_to(user).filter(pk__in=[r.pk for r in active]).values_list("pk", flat=True))
    slots = queue_slots() or {}
    paces: dict[tuple, float | None] = {}
    asked = {r.pk for r in waiting}
    found = {}
    for queue in queues:
        holding = [r for r in active if r.queue == queue and r.state in HOLDING]
        queued = [r for r in active if r.queue == queue and r.state == Run.QUEUED]
        durations = {r.pk: _remaining_seconds(r, paces) for r in holding + queued}
        for position, run in enumerate(queued, 1):
            if run.pk not in asked:
                continue
            front = holding + queued[:position - 1]
            found[run.pk] = QueuePlace(
                queue=queue.removeprefix(settings.QUEUE_PREFIX), position=position,
                ahead=[r.pk for r in front if r.pk in visible], others=sum(r.pk not in visible for r in front),
                eta_seconds=_wait(holding, queued[:position - 1], durations, slots.get(queue)))
    return found


def place_of(run: Run, user) -> QueuePlace | None:
    return places([run], user).get(run.pk)


def _wait(holding: list, queued_ahead: list, durations: dict, slots: int | None) -> float | None:
    """Seconds until a slot frees for the run behind `queued_ahead`: the queue played forward, each slot taking the
    next run as it frees."""
    if not slots or any(durations[r.pk] is None for r in holding + queued_ahead):
        return None
    free_at = sorted(durations[r.pk] for r in holding)[:slots] + [0.0] * max(0, slots - len(holding))
    heapq.heapify(free_at)
    # more runs holding than slots (a worker stopped meanwhile): the extra ones wait for a slot too
    for run in sorted(holding, key=lambda r: durations[r.pk])[slots:] + queued_ahead:
        heapq.heappush(free_at, heapq.heappop(free_at) + durations[run.pk])
    return free_at[0]


def _remaining_seconds(run: Run, paces: dict) -> float | None:
    total = run.total_steps
    if not total:
        return None
    done = run.last_step or 0
    seconds, since = run.training_clock() if run.state in HOLDING else (0.0, None)
    if since is not None:
        seconds += (timezone.now() - since).total_seconds()
    pace = seconds / done if done > 0 and seconds > 0 else _recent_pace(run, paces)
    return None if pace is None else max(0.0, (total - done) * pace)


def _recent_pace(run: Run, paces: dict) -> float | None:
    """The median seconds per step of the queue's latest succeeded runs of the same method and model."""
    key = (run.queue, run.method, run.model)
    if key not in paces:
        recent = (Run.objects.filter(queue=run.queue, method=run.method, model=run.model, state=Run.SUCCEEDED,
                                     last_step__gt=0).order_by("-finished_at")[:RECENT_RUNS])
        per_step = [s / r.last_step for r in recent for s in [r.training_clock()[0]] if s > 0]
        paces[key] = statistics.median(per_step) if per_step else None
    return paces[key]

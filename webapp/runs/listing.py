"""The run list (`/`): filters, and the figures each row shows, read in a fixed number of
queries whatever the number of runs (no query per row)."""
import json
from dataclasses import dataclass, field

from django.db import connection
from django.db.models.expressions import RawSQL

from rl import metric_catalogue
from rl.methods import METHODS
from webapp.accounts.access import teams_of
from webapp.alerts.models import Alert
from webapp.accounts.teams import current_team
from webapp.numbers import whole_number
from webapp.prompts.models import PromptSet

from .health import no_worker_for, worker_command
from webapp.metrics import series

from .models import Run
from .queue_place import places

MAX_LISTED = 200
# The last value of each is shown per run (rl/metric_catalogue.py's run_list records); the live `run` message's
# `health` carries the same names.
HEALTH_COLUMNS = tuple(r for r in metric_catalogue.RECORDS if r.run_list)
ALL_TEAMS = "all"
FILTER_NAMES = ("team", "method", "state", "source", "experiment", "prompt_set", "created_by", "tag", "archived")


@dataclass
class RunListing:
    runs: list
    filters: dict  # the GET values, "" where unset; team is "all" or an id
    teams: list  # the teams whose runs may be listed (their sockets are opened)
    options: dict = field(default_factory=dict)
    truncated: bool = False

    def live_config(self) -> dict:
        return {"teams": [t.pk for t in self.teams], "health": [{"name": r.name, "decimals": r.decimals} for r in HEALTH_COLUMNS],
                "state_filter": self.filters["state"], "archived_filter": bool(self.filters["archived"])}


def run_listing(request) -> RunListing:
    user = request.user
    my_teams = list(teams_of(user))
    filters = {name: request.GET.get(name, "").strip() for name in FILTER_NAMES}
    if not filters["team"]:
        team = current_team(request)
        filters["team"] = str(team.pk) if team else ALL_TEAMS
    if filters["team"] == ALL_TEAMS:
        teams = my_teams
    else:
        teams = [t for t in my_teams if str(t.pk) == filters["team"]]  # another team's id lists nothing

    runs = Run.objects.visible_to(user).filter(team__in=[t.pk for t in teams])
    # archived runs are kept but listed only when asked for (?archived=1: with the others, so that an archived run
    # can be ticked beside an active one and compared)
    if not filters["archived"]:
        runs = runs.filter(archived_at__isnull=True)
    if filters["method"]:
        runs = runs.filter(method=filters["method"])
    if filters["source"]:  # trained by Evolab's workers or elsewhere (DESIGN §4.8)
        runs = runs.filter(source=filters["source"])
    if filters["state"]:
        runs = runs.filter(state=filters["state"])
    if filters["experiment"]:  # the MLflow experiment a run trained elsewhere logs to (its "View experiment" link)
        runs = runs.filter(external__experiment_id=whole_number(filters["experiment"]) or 0)
    if filters["prompt_set"]:
        runs = runs.filter(prompt_set_id=whole_number(filters["prompt_set"]) or 0)
    if filters["created_by"]:
        runs = runs.filter(created_by__username=filters["created_by"])
    if filters["tag"]:
        runs = with_tag(runs, filters["tag"])
    runs = runs.select_related("prompt_set", "created_by", "team").annotate(**_last_metric_annotations())
    listed = list(runs[: MAX_LISTED + 1])
    truncated = len(listed) > MAX_LISTED
    listed = listed[:MAX_LISTED]
    _attach_alerts(listed)
    _attach_rows(listed)
    found = places(listed, user)  # a queued run's place in its worker queue, in a few queries for the whole list
    for run in listed:
        run.queue_place = found.get(run.pk)
    return RunListing(runs=listed, filters=filters, teams=teams, options=_options(user, my_teams, teams),
                      truncated=truncated)


def with_tag(runs, tag: str):
    """Runs whose `tags` list holds exactly `tag`. PostgreSQL's jsonb containment uses the
    GIN-free `@>`; SQLite has no JSON containment in Django, so json_each does it."""
    if connection.vendor == "postgresql":
        return runs.filter(tags__contains=[tag])
    table = Run._meta.db_table
    return runs.filter(pk__in=RawSQL(f"SELECT r.id FROM {table} r, json_each(r.tags) t WHERE t.value = %s", [tag]))


def _last_metric_annotations() -> dict:
    """One correlated subquery per health column, served by the series' (run, clock, name) and
    the points' (series, step) indexes:
    the whole list is one SQL query."""
    annotations = {}
    for n, record in enumerate(HEALTH_COLUMNS):
        annotations[f"health_{n}"] = series.latest_value(record.name)
    return annotations


def _attach_alerts(runs: list) -> None:
    """The current alerts (open, acknowledged, or ended with their run before anyone acknowledged them) of all
    listed runs in one query."""
    by_run = {r.pk: {} for r in runs}
    rows = Alert.objects.current().filter(run_id__in=list(by_run)).values_list("run_id", "id", "severity")
    for run_id, alert_id, severity in rows:
        by_run[run_id][alert_id] = severity
    for run in runs:
        alerts = by_run[run.pk]
        run.active_alerts = alerts
        run.active_alerts_json = json.dumps({str(k): v for k, v in alerts.items()})
        run.alert_count = len(alerts)
        run.worst_severity = max(alerts.values(), key=Alert.SEVERITY_RANK.__getitem__) if alerts else ""


def _attach_rows(runs: list) -> None:
    for run in runs:
        run.health = [
            {"name": record.name, "value": getattr(run, f"health_{n}"), "decimals": record.decimals}
            for n, record in enumerate(HEALTH_COLUMNS)
        ]
        run.method_title = METHODS[run.method].title if run.method in METHODS else run.method
        queue = no_worker_for(run)  # asks the broker at most once per ~10 s, only for queued runs
        run.no_worker_queue = queue
        run.worker_command = worker_command(queue) if queue else ""


def _options(user, my_teams, teams) -> dict:
    """The filter bar's choices, from what the user may see."""
    visible = Run.objects.visible_to(user).filter(team__in=[t.pk for t in teams])
    creators = sorted(visible.order_by().values_list("created_by__username", flat=True).distinct())
    tags = set()
    for run_tags in visible.order_by("-created_at").values_list("tags", flat=True)[:MAX_LISTED]:
        tags.update(t for t in run_tags or [] if isinstance(t, str))
    return {
        "teams": my_teams,
        "methods": [(m.name, m.title) for m in METHODS.values()],
        "states": [s for s, _ in Run.STATES],
        "sources": [(Run.EVOLAB, "by Evolab"), (Run.EXTERNAL, "elsewhere")],
        # the MLflow experiments holding a visible run trained elsewhere, in one query
        "experiments": list(visible.filter(external__isnull=False).order_by("external__experiment__name").values_list(
            "external__experiment_id", "external__experiment__name", "team__name").distinct()),
        "prompt_sets": PromptSet.objects.visible_to(user).filter(team__in=[t.pk for t in teams]).select_related("team"),
        "creators": creators,
        "tags": sorted(tags),
        "health_columns": [record.title for record in HEALTH_COLUMNS],
    }

"""MLflow experiments in Evolab's teams (DESIGN §4.8): an experiment lives in one team. A user in one
team names it as MLflow does; a user in several teams names it `TEAM/NAME`. MLflow's experiment "0" (where
a client puts a run when no experiment is set) is the user's team's `Default`, made when first used.
Another team's experiment answers exactly like a missing one (DESIGN §4.4)."""
import os

from django.db import IntegrityError, transaction

from webapp.accounts.access import teams_of
from webapp.accounts.models import Membership, Team
from webapp.numbers import whole_number

from .mlflow_protocol import MAX_EXPERIMENT_NAME_LENGTH, MlflowError, invalid, millis, missing, tags_json
from .models import Experiment

DEFAULT_EXPERIMENT_ID = "0"


class Caller:
    """The user behind a request and their teams (read once per request, when first needed)."""

    def __init__(self, user, teams: list | None = None):
        self.user, self._teams = user, teams

    @classmethod
    def of(cls, user) -> "Caller":
        return cls(user)

    @property
    def teams(self) -> list:
        if self._teams is None:
            self._teams = list(teams_of(self.user))
        return self._teams

    @property
    def team_ids(self) -> list[int]:
        return [t.pk for t in self.teams]

    def require_member(self, team_id: int) -> None:
        """Logging and creating need a member's or admin's role in the team (viewers read)."""
        role = Membership.objects.filter(user=self.user, team_id=team_id).values_list("role", flat=True).first()
        if not Membership.allows(role, Membership.MEMBER):
            name = next((t.name for t in self.teams if t.pk == team_id), team_id)
            raise MlflowError("PERMISSION_DENIED", f"your role in team {name!r} is {role or 'none'}; only members and "
                                                   f"admins can create or log to runs")

    def only_team(self, what: str) -> Team:
        if not self.teams:
            raise MlflowError("PERMISSION_DENIED", "you are not a member of any team; ask a team admin to add you")
        if len(self.teams) > 1:
            names = ", ".join(repr(t.name) for t in self.teams)
            raise invalid(f"you are in several teams ({names}): {what} (e.g. set MLFLOW_EXPERIMENT_NAME="
                          f"'{self.teams[0].name}/my-experiment')")
        return self.teams[0]

    def split_name(self, name: str) -> tuple[Team, str]:
        """(team, name in the team) of a name as the client gave it."""
        prefix, slash, rest = name.partition("/")
        if slash and rest:
            for team in self.teams:
                if team.name == prefix:
                    return team, rest
        return self.only_team(f"name the experiment TEAM/{name}"), name

    def display_name(self, experiment: Experiment) -> str:
        if len(self.teams) > 1:
            team = next((t for t in self.teams if t.pk == experiment.team_id), None)
            return f"{team.name if team else experiment.team_id}/{experiment.name}"
        return experiment.name


def default_experiment(team: Team) -> Experiment:
    """The team's Default (MLflow's experiment "0"), made when first asked for, dated from the team's creation: in
    MLflow it is the store's first experiment, listed last by search_experiments' newest-first order."""
    try:
        with transaction.atomic():
            experiment, made = Experiment.objects.get_or_create(team=team, name=Experiment.DEFAULT_NAME)
            if made:
                Experiment.objects.filter(pk=experiment.pk).update(created_at=team.created_at,
                                                                   updated_at=team.created_at)
                experiment.created_at = experiment.updated_at = team.created_at
            return experiment
    except IntegrityError:  # made by a parallel request between our read and write
        return Experiment.objects.get(team=team, name=Experiment.DEFAULT_NAME)


def visible(caller: Caller, experiment_id) -> Experiment:
    """The experiment of that id among the caller's teams ("0": their team's Default; a deleted one too, as
    MLflow finds it), else RESOURCE_DOES_NOT_EXIST, the same answer for another team's and a missing one."""
    return visible_all(caller, [experiment_id])[0]


def visible_all(caller: Caller, experiment_ids: list) -> list[Experiment]:
    """visible() of each id (each once), the experiments read in one query: a search naming many ran one per id."""
    wanted = list(dict.fromkeys(str(i if i is not None else "").strip() for i in experiment_ids))
    keys = {i: whole_number(i) for i in wanted if i != DEFAULT_EXPERIMENT_ID}
    numbers = {pk for pk in keys.values() if pk is not None}
    found = {e.pk: e for e in Experiment.objects.of_teams(caller.team_ids).filter(pk__in=numbers)} if numbers else {}
    experiments = []
    for experiment_id in wanted:
        if experiment_id == DEFAULT_EXPERIMENT_ID:
            experiments.append(default_experiment(caller.only_team("say which team's experiment")))
        elif keys[experiment_id] in found:
            experiments.append(found[keys[experiment_id]])
        else:
            raise missing(f"No Experiment with id={experiment_id} exists")
    return experiments


def by_name(caller: Caller, name: str) -> Experiment:
    team, bare = caller.split_name(name)
    if bare == Experiment.DEFAULT_NAME:
        return default_experiment(team)
    found = Experiment.objects.filter(team=team, name=bare).first()
    if found is None:
        raise missing(f"Could not find experiment with name '{name}'")
    return found


def create(caller: Caller, name: str, tags: list[tuple[str, str]], artifact_location: str = "") -> Experiment:
    if len(name) > MAX_EXPERIMENT_NAME_LENGTH:
        raise invalid(f"Experiment name is {len(name)} characters long; at most {MAX_EXPERIMENT_NAME_LENGTH}.")
    team, bare = caller.split_name(name)
    caller.require_member(team.pk)
    try:
        with transaction.atomic():
            return Experiment.objects.create(team=team, name=bare, tags=dict(tags),
                                             artifact_location=_resolved(artifact_location or ""))
    except IntegrityError:
        raise MlflowError("RESOURCE_ALREADY_EXISTS", f"Experiment '{name}' already exists.") from None


def _resolved(location: str) -> str:
    """A relative local path made absolute against the server's working directory, as MLflow's store does
    (mlflow.utils.uri.resolve_uri_if_local); any other location is kept as given."""
    if location and "://" not in location and ":" not in location.split("/", 1)[0] and not location.startswith("/"):
        return os.path.abspath(location)
    return location


def experiment_json(caller: Caller, experiment: Experiment) -> dict:
    return {
        "experiment_id": str(experiment.pk),
        "name": caller.display_name(experiment),
        # as given to create_experiment, else Evolab's artifact service (artifacts.py)
        "artifact_location": experiment.artifact_root,
        "lifecycle_stage": experiment.lifecycle_stage,
        "last_update_time": millis(experiment.updated_at),
        "creation_time": millis(experiment.created_at),
        "tags": tags_json(experiment.tags),
    }

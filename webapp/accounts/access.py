"""Who may see and do what (DESIGN §4.4). Views call these; models carry the rules.

Anything of a team the user is not in must answer exactly like something that does not
exist, so lookups filter by team first and only then by id: a 404 never tells an
outsider whether the id exists."""
from django.core.exceptions import PermissionDenied
from django.http import Http404

from rl.params import FieldError
from webapp.numbers import whole_number
from webapp.plain_text import control_character

from .models import Membership, Team


def teams_of(user):
    return Team.objects.of(user)


def team_or_404(user, pk) -> Team:
    """The team `pk` when `user` is in it; a 404 otherwise (another team's pages answer like a missing one)."""
    team = teams_of(user).filter(pk=pk).first()
    if team is None:
        raise Http404("no such team")
    return team


def role_in(user, team) -> str | None:
    team_id = getattr(team, "pk", team)
    if user is None or not user.is_authenticated or team_id is None:
        return None
    return Membership.objects.filter(user=user, team_id=team_id).values_list("role", flat=True).first()


def require_role(user, team, needed: str) -> str:
    """The user's role in `team`, or PermissionDenied (403) when it is below `needed`.
    Callers have already checked the object is visible, so a 403 leaks nothing."""
    role = role_in(user, team)
    if not Membership.allows(role, needed):
        verbs = {Membership.MEMBER: "launch, cancel, resume, clone or upload", Membership.ADMIN: "manage this team"}
        raise PermissionDenied(f"your role in team {getattr(team, 'name', team)!r} is {role or 'none'}; "
                               f"only {'admins' if needed == Membership.ADMIN else 'members and admins'} "
                               f"can {verbs.get(needed, 'do this')}")
    return role


def team_for_new_object(user, value=None, needed: str = Membership.MEMBER) -> Team:
    """The team a new prompt set or run goes to: `value` (an id or a name) when given,
    else the user's only team. Raises FieldError naming `team` (unknown or ambiguous) or
    PermissionDenied (a viewer)."""
    teams = teams_of(user)
    if value in (None, ""):
        mine = list(teams[:2])
        if not mine:
            raise FieldError("team", "you are not a member of any team; ask a team admin to add you")
        if len(mine) > 1:
            raise FieldError("team", "you are in several teams: say which with 'team' (its id or name)")
        team = mine[0]
    else:
        text = str(value).strip()
        team = _team_named(teams, text)
        if team is None:
            shown = text if len(text) <= 40 else text[:40] + "…"
            raise FieldError("team", f"no team {shown!r} among yours", status=404)
    require_role(user, team, needed)
    return team


def _team_named(teams, text: str) -> Team | None:
    """The team whose id or name is `text`. A text that can be neither (past a bigint, longer than a name, with a
    NUL or a lone surrogate, which PostgreSQL cannot be asked about) names no team: each was a 500."""
    number = whole_number(text)
    if number is not None:
        return teams.filter(pk=number).first()
    if len(text) > Team._meta.get_field("name").max_length or control_character(text):
        return None
    return teams.filter(name=text).first()

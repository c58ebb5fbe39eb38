"""The current team of a browser session: what list pages show and where uploads and
launches go unless the user picks another. Chosen with the header's team switcher."""
from .access import teams_of

SESSION_KEY = "evolab_team_id"


def current_team(request):
    user = request.user
    if not user.is_authenticated:
        return None
    cached = getattr(request, "_evolab_current_team", None)
    if cached is not None:
        return cached
    teams = teams_of(user)
    chosen = request.session.get(SESSION_KEY) if hasattr(request, "session") else None
    team = teams.filter(pk=chosen).first() if chosen else None
    team = team or teams.first()
    request._evolab_current_team = team
    return team


def switch_team(request, team) -> None:
    request.session[SESSION_KEY] = team.pk
    request._evolab_current_team = team

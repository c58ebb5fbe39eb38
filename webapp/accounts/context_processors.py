from .access import teams_of
from .teams import current_team


def teams(request):
    """The header's team switcher: the user's teams and the one pages default to."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"my_teams": list(teams_of(user)), "current_team": current_team(request)}

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render

from rl.methods import METHODS
from webapp.accounts.access import TeamChoiceError, team_for_new_object
from webapp.accounts.teams import current_team

from .actions import PromptFileError, upload_prompt_set
from .models import PromptSet

PREVIEW_ROWS = 10


@login_required
def prompt_set_list(request):
    error = None
    team = current_team(request)
    if request.method == "POST":
        uploaded = request.FILES.get("file")
        try:
            team = team_for_new_object(request.user, request.POST.get("team") or getattr(team, "pk", None))
        except TeamChoiceError as exc:
            error = exc.message
        except PermissionDenied as exc:
            error = str(exc)
        if error:
            pass
        elif uploaded is None:
            error = "Choose a file to upload."
        else:
            try:
                prompt_set = upload_prompt_set(user=request.user, team=team, name=request.POST.get("name", ""),
                                               uploaded_file=uploaded)
            except PromptFileError as exc:
                error = str(exc) if exc.field == "name" else f"{uploaded.name}: {exc}"
            else:
                return redirect("prompts:detail", pk=prompt_set.pk)
    sets = PromptSet.objects.visible_to(request.user).select_related("owner", "team")
    if team is not None and request.GET.get("team") != "all":
        sets = sets.filter(team=team)
    return render(
        request,
        "prompts/list.html",
        {"prompt_sets": sets, "error": error, "name": request.POST.get("name", ""), "team": team},
        status=400 if error else 200,
    )


@login_required
def prompt_set_detail(request, pk):
    prompt_set = get_object_or_404(PromptSet.objects.visible_to(request.user), pk=pk)
    return render(
        request,
        "prompts/detail.html",
        {"prompt_set": prompt_set, "preview": prompt_set.prompts.all()[:PREVIEW_ROWS], "methods": METHODS.values()},
    )

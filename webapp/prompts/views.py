from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render

from rl.methods import METHODS
from rl.params import FieldError
from webapp.accounts.access import team_for_new_object
from webapp.accounts.teams import current_team

from .actions import PromptFileError, receive_prompt_file
from .models import PromptSet, PromptUpload

PREVIEW_ROWS = 10


@login_required
def prompt_set_list(request):
    error = None
    team = current_team(request)
    if request.method == "POST":
        uploaded = request.FILES.get("file")
        try:
            team = team_for_new_object(request.user, request.POST.get("team") or getattr(team, "pk", None))
        except FieldError as exc:
            error = exc.message
        except PermissionDenied as exc:
            error = str(exc)
        if error:
            pass
        elif uploaded is None:
            error = "Choose a file to upload."
        else:
            try:
                received = receive_prompt_file(user=request.user, team=team, name=request.POST.get("name", ""),
                                               uploaded_file=uploaded)
            except PromptFileError as exc:
                error = str(exc) if exc.field == "name" else f"{uploaded.name}: {exc}"
            else:
                if isinstance(received, PromptUpload):
                    return redirect("prompts:upload", pk=received.pk)
                return redirect("prompts:detail", pk=received.pk)
    sets = PromptSet.objects.visible_to(request.user).select_related("owner", "team")
    pending = PromptUpload.objects.visible_to(request.user).exclude(state=PromptUpload.DONE).select_related("owner")[:10]
    if team is not None and request.GET.get("team") != "all":
        sets = sets.filter(team=team)
    return render(
        request,
        "prompts/list.html",
        {"prompt_sets": sets, "uploads": pending, "error": error, "name": request.POST.get("name", ""), "team": team},
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


@login_required
def prompt_upload(request, pk):
    """A large upload being parsed by a worker: its progress (static/js/prompt_upload.js follows it and
    opens the set when it is saved), or the error naming the row and field."""
    upload = get_object_or_404(PromptUpload.objects.visible_to(request.user).select_related("owner"), pk=pk)
    if upload.state == PromptUpload.DONE and upload.prompt_set_id:
        return redirect("prompts:detail", pk=upload.prompt_set_id)
    return render(request, "prompts/upload.html", {"upload": upload})

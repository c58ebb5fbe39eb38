from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render

from rl.methods import METHODS

from .actions import PromptFileError, upload_prompt_set
from .models import PromptSet

PREVIEW_ROWS = 10


@login_required
def prompt_set_list(request):
    error = None
    if request.method == "POST":
        uploaded = request.FILES.get("file")
        if uploaded is None:
            error = "Choose a file to upload."
        else:
            try:
                prompt_set = upload_prompt_set(user=request.user, name=request.POST.get("name", ""), uploaded_file=uploaded)
            except PromptFileError as exc:
                error = f"{uploaded.name}: {exc}"
            else:
                return redirect("prompts:detail", pk=prompt_set.pk)
    return render(
        request,
        "prompts/list.html",
        {"prompt_sets": PromptSet.objects.select_related("owner"), "error": error, "name": request.POST.get("name", "")},
        status=400 if error else 200,
    )


@login_required
def prompt_set_detail(request, pk):
    prompt_set = get_object_or_404(PromptSet, pk=pk)
    return render(
        request,
        "prompts/detail.html",
        {"prompt_set": prompt_set, "preview": prompt_set.prompts.all()[:PREVIEW_ROWS], "methods": METHODS.values()},
    )

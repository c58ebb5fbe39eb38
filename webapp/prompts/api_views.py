from django.http import JsonResponse

from webapp.accounts.access import team_for_new_object
from webapp.api import api_view, error

from .actions import PromptFileError, receive_prompt_file
from .models import PromptSet, PromptUpload

PREVIEW_ROWS = 5


def _with_preview(prompt_set):
    return {**prompt_set.to_json(), "preview": [p.to_json() for p in prompt_set.prompts.all()[:PREVIEW_ROWS]]}


@api_view(["GET", "POST"])
def prompt_sets(request):
    if request.method == "GET":
        sets = PromptSet.objects.visible_to(request.user).select_related("owner")
        return JsonResponse({"prompt_sets": [ps.to_json() for ps in sets]})
    team = team_for_new_object(request.user, request.POST.get("team"))
    uploaded = request.FILES.get("file")
    if uploaded is None:
        return error("attach the prompt file as the multipart field 'file'", field="file")
    try:
        received = receive_prompt_file(user=request.user, team=team, name=request.POST.get("name", ""),
                                       uploaded_file=uploaded)
    except PromptFileError as exc:
        return error(str(exc), field="name" if exc.field == "name" else "file")
    if isinstance(received, PromptUpload):
        # a large file: a worker parses it; the client follows the upload until it names its set
        response = JsonResponse({"upload": _upload_json(received)}, status=202)
        response["Location"] = f"/api/prompt-uploads/{received.pk}"
        return response
    return JsonResponse(_with_preview(received), status=201)


@api_view(["GET"])
def prompt_upload_detail(request, pk):
    upload = PromptUpload.objects.visible_to(request.user).select_related("owner", "prompt_set__owner").filter(pk=pk).first()
    if upload is None:
        return error(f"no prompt upload with id {pk}", 404)
    return JsonResponse({"upload": _upload_json(upload)})


def _upload_json(upload):
    data = upload.to_json()
    data["prompt_set"] = _with_preview(upload.prompt_set) if upload.prompt_set_id else None
    return data


@api_view(["GET"])
def prompt_set_detail(request, pk):
    prompt_set = PromptSet.objects.visible_to(request.user).filter(pk=pk).first()
    if prompt_set is None:
        return error(f"no prompt set with id {pk}", 404)
    return JsonResponse(_with_preview(prompt_set))

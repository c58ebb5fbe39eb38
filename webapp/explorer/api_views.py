"""The rollout explorer's API (DESIGN §4.3): a step's groups, one group, one prompt's history, the search,
and the exports of a run's rollouts and metrics."""
from itertools import chain

from django.http import JsonResponse, StreamingHttpResponse

from webapp.api import api_view, error, only_params
from webapp.runs.api_views import with_run, with_run_id
from webapp.runs.models import Group, Run
from webapp.runs.queries import group_steps, groups_at

from . import exports
from .history import prompt_history
from .search import SEARCH_PARAMS, search

METRICS_EXPORT_PARAMS = ("format", "layout", "names")


@api_view(["GET"])
@with_run_id
def run_metrics_export(request, run_id):
    """The run's metrics as a CSV or Parquet file, long (a row per point) or wide (a row per step, a column per
    metric: `layout=wide`), streamed (webapp/explorer/exports.py)."""
    only_params(request.GET, METRICS_EXPORT_PARAMS, "the metrics export")
    kind = request.GET.get("format", "csv")
    if kind not in exports.FORMATS:
        return error(f"format must be one of {', '.join(exports.FORMATS)}, not {kind!r}", field="format")
    layout = request.GET.get("layout", "long")
    if layout not in exports.LAYOUTS:
        return error(f"layout must be one of {', '.join(exports.LAYOUTS)}, not {layout!r}", field="layout")
    asked = [n for n in request.GET.get("names", "").split(",") if n] or None
    names = exports.metric_names(run_id, asked)
    body = exports.METRIC_WRITERS[layout, kind](run_id, names)
    run = Run.objects.only("name").get(pk=run_id)
    return _attachment(body, exports.FORMATS[kind], exports.metrics_filename(run, asked and names, layout, kind))


@api_view(["GET"])
@with_run_id
def run_rollouts_export(request, run_id):
    """Every rollout the search's filters match, in its order, as JSONL, CSV or Parquet, streamed.
    The first page is read before the response starts, so a bad filter is a 400, not a cut file."""
    only_params(request.GET, ("format", *SEARCH_PARAMS), "the rollouts export")
    kind = request.GET.get("format", "jsonl")
    if kind not in exports.ROLLOUT_FORMATS:
        return error(f"format must be one of {', '.join(exports.ROLLOUT_FORMATS)}, not {kind!r}", field="format")
    run = Run.objects.select_related("prompt_set").get(pk=run_id)
    params = {k: v for k, v in request.GET.items() if k not in ("format", "limit", "cursor")}
    pages = exports.rollout_pages(run, params)
    first = next(pages, [])
    write = {"jsonl": exports.rollouts_jsonl, "csv": exports.rollouts_csv, "parquet": exports.rollouts_parquet}[kind]
    return _attachment(write(chain([first], pages)), exports.ROLLOUT_FORMATS[kind],
                       exports.rollouts_filename(run, params, kind))


def _attachment(body, content_type: str, filename: str) -> StreamingHttpResponse:
    """A file download streamed as `body` yields its pieces."""
    response = StreamingHttpResponse(exports.in_pieces(body), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@api_view(["GET"])
@with_run_id
def run_rollout_search(request, run_id):
    """Every rollout of the run matching the filters, a keyset page at a time (webapp/explorer/search.py)."""
    only_params(request.GET, SEARCH_PARAMS, "the search")
    page = search(run_id, request.GET)
    body = {"run": run_id, "results": page.results, "next_cursor": page.next_cursor, "count": page.count,
            "count_exact": page.count_exact}
    if page.text_not_searched is not None:
        body["text_index"] = page.text_index_json()
    return JsonResponse(body)


@api_view(["GET"])
@with_run
def run_rollouts(request, run):
    step = request.GET.get("step")
    if step not in (None, ""):
        try:
            step = int(step)
        except ValueError:
            return error(f"step must be a whole number, not {step!r}", field="step")
    else:
        step = None
    step, groups = groups_at(run, step, request.GET.get("prompt") or None)
    return JsonResponse(
        {
            "run": run.pk,
            "step": step,
            "steps": group_steps(run),
            "groups": [
                {**g.summary_json(), "rollouts": [r.to_json() for r in g.rollouts.all()]} for g in groups
            ],
        }
    )


@api_view(["GET"])
@with_run
def run_prompt_history(request, run, prompt_id):
    history = prompt_history(run, prompt_id)
    if history is None:
        return error(f"run {run.pk} has no rollouts of prompt {prompt_id!r}", 404)
    return JsonResponse({"run": run.pk, **history.to_json()})


@api_view(["GET"])
@with_run
def run_group(request, run, step, prompt_id):
    group = Group.objects.filter(run=run, step=step, prompt_id=prompt_id).order_by("-seq").first()
    if group is None:
        return error(f"run {run.pk} has no group for prompt {prompt_id!r} at step {step}", 404)
    return JsonResponse(
        {**group.summary_json(), "similarity": group.similarity, "rollouts": [r.to_json() for r in group.rollouts.all()]}
    )

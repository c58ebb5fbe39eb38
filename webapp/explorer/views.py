"""The rollout explorer's pages: a step's groups, the search over every step, one prompt's history."""
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, render

from rl.answers import matches_reference
from rl.params import FieldError
from webapp.numbers import whole_number
from webapp.runs.models import Run
from webapp.runs.queries import groups_at, step_bounds

from .exports import with_prompts
from .history import prompt_history, prompt_texts
from .search import SEARCH_PARAMS, search, search_orders
from .text_search import words

@login_required
def run_rollouts(request, pk):
    """One step's groups, GROUPS_PER_PAGE at a time, each foldable: its heatmap, its rollouts (their
    texts folded), and a search over every step."""
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("prompt_set"), pk=pk)
    step = whole_number(request.GET.get("step", ""))  # None: none asked for (or not a number): the latest step
    step, groups = groups_at(run, step, request.GET.get("prompt") or None)
    page = Paginator(groups, GROUPS_PER_PAGE).get_page(request.GET.get("page"))
    groups = list(page.object_list)
    prompts = prompt_texts(run, {g.prompt_id for g in groups})
    rows = []
    for n, group in enumerate(groups, 1):
        prompt = prompts.get(group.prompt_id)
        label = prompt.label if prompt else None
        rollouts = list(group.rollouts.all())
        if label is not None:  # monitoring only, as label_accuracy: the label never reaches a reward
            for r, correct in zip(rollouts, matches_reference([r.answer for r in rollouts], label)):
                r.correct = correct
        rows.append({"group": group, "rollouts": rollouts, "prompt": prompt, "label": label,
                     "extra_keys": sorted({k for r in rollouts for k in r.extra}), "heatmap_id": f"heatmap-{n}-data"})
    return render(request, "explorer/rollouts.html", {
        "run": run, "step": step, "rows": rows, "page": page, "open_all": len(rows) <= 2,
        **_search_form(run, {}), **step_bounds(run, step)})


@login_required
def rollout_search_page(request, pk):
    """Every rollout of the run matching the search's filters (the API's rules, webapp/explorer/search.py),
    a keyset page at a time, with the export of exactly those rollouts."""
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("prompt_set"), pk=pk)
    params = {k: v for k, v in request.GET.items() if k in SEARCH_PARAMS and v.strip()}
    context = {"run": run, **_search_form(run, params),
               "filters": urlencode({k: v for k, v in params.items() if k not in ("cursor", "limit")})}
    try:
        found = search(run.pk, params)
    except FieldError as exc:
        return render(request, "explorer/rollout_search.html", {**context, "error": str(exc), "error_field": exc.field},
                      status=400)
    extra_keys = sorted({k for r in found.results for k in r["extra"]})
    # the held-out label and whether the answer equals it, as the exports and the rollouts page show them
    results = with_prompts(run, found.results)
    # where this page starts among the matches: the keyset cursor does not say, so the next page's link carries it
    first_row = (whole_number(request.GET.get("row", "")) or 1) if "cursor" in params else 1
    next_url = (urlencode({**params, "cursor": found.next_cursor, "row": first_row + len(results)})
                if found.next_cursor else None)
    return render(request, "explorer/rollout_search.html", {
        **context, "results": results, "extra_keys": extra_keys, "next_url": next_url,
        "labelled": any(r["label"] is not None for r in results), "first_row": first_row,
        "query_words": words(params.get("q", "")),  # marked in each text as the search cut them
        "last_row": first_row + len(results) - 1,
        "text_index": found.text_index_json(), "count": found.count, "count_exact": found.count_exact,
        "first_url": urlencode({k: v for k, v in params.items() if k != "cursor"}) if "cursor" in params else None})


def _search_form(run: Run, params: dict) -> dict:
    """What templates/explorer/_rollout_search_form.html needs: the values asked and the choices offered."""
    return {"params": params, "search_orders": search_orders(run), "search_booleans": SEARCH_BOOLEANS,
            "search_limits": SEARCH_LIMITS}


@login_required
def prompt_history_page(request, pk, prompt_id):
    """One prompt over the run: per step its majority answer, majority ratio, distinct answers,
    similarity and reward means (and, with held-out labels, whether the majority was right)."""
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("prompt_set"), pk=pk)
    history = prompt_history(run, prompt_id)
    if history is None:
        raise Http404(f"run {run.pk} has no rollouts of this prompt")
    return render(request, "explorer/prompt_history.html", {"run": run, "history": history,
                                                         "history_json": history.to_json()["history"]})


# Groups shown per page of the rollouts page: the papers' 8 prompts of a step on one page.
GROUPS_PER_PAGE = 8


# The search form's yes/no filters: (parameter, title, yes, no).
SEARCH_BOOLEANS = [("in_majority", "Majority", "majority", "minority"), ("valid", "Valid", "valid", "invalid"),
                   ("trained", "Trained", "trained", "not trained")]


SEARCH_LIMITS = [10, 50, 200, 1000]

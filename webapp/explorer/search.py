"""Searching every rollout of a run (DESIGN §4.6, issue 10): filters, an order, keyset pages.

A page is the `limit` rollouts after the cursor in the chosen order, read through the index of that
order (Rollout.Meta.indexes: run, field, id): never OFFSET, so the millionth rollout costs what the
first does. The cursor is the last row's (field value, id), opaque to clients. Missing values (a
rollout without a reward) sort lowest. Ordering by one of the run's method's search extras (EVOL-RL's
`novelty`, COMPASS's `confidence`: Method.search_extras) walks its index, on PostgreSQL and SQLite
(search_indexes.py); any other extra is sorted, and only over a bounded number of rollouts (a step range
on a large run): settings.SEARCH_UNINDEXED_SORT_MAX. `q` matches rollouts whose text has every word of it, through the text
index (webapp/explorer/text_search.py); `prompt_text` the rollouts of prompts whose text has every word.
"""
import base64
import json
import math
from dataclasses import dataclass

from django.conf import settings
from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, F, FloatField, Q, Value
from django.db.models.expressions import RawSQL

from rl.params import FieldError, plain_number
from webapp.prompts.models import Prompt
from webapp.numbers import MAX_DIGITS, whole_number

from webapp import bulk
from webapp.runs.models import Group, Rollout, Run, RZeroQuestion

from . import search_indexes, text_search

INDEXED_ORDERS = ("step", "reward", "advantage", "length")
NULLABLE = set(search_indexes.NULLABLE_ORDERS)
MAX_LIMIT, DEFAULT_LIMIT = 1000, 50
MAX_QUERY_CHARS = 1000
MAX_PROMPTS_MATCHED = 10_000
# A search's matches are counted up to this many (a COUNT over a LIMIT of COUNT_MAX + 1 rows): the count
# stops there, so it costs at most that many rows whatever the run's size, and the answer says "more than".
COUNT_MAX = 1000
# A step range this share of the run's steps or less is read through the step index whatever the order
# (a page of 50 by another order walks about 50 / share rows of that order's index; below about 1%
# sorting the range's rollouts costs less).
FEW_STEPS_SHARE = 0.01
BOOLEANS = {"in_majority": "in_majority", "valid": "valid", "trained": "used_for_training", "superseded": "superseded"}
TRUE, FALSE = {"true", "1", "yes"}, {"false", "0", "no"}
EXTRA_KEY_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


# the query parameters a search reads (GET /api/runs/{id}/rollouts/search and its page)
SEARCH_PARAMS = ("q", "prompt", "prompt_text", "step_min", "step_max", "answer", "in_majority", "valid", "trained", "reward_min",
                 "reward_max", "superseded", "order", "limit", "cursor")


def search_orders(run) -> list[str]:
    """The orders to offer for a run: the indexed fields, its method's search extras, then the other numeric
    extras its latest group carries (sorted over bounded ranges, _order_by_extra)."""
    declared = list(run.spec.search_extras) if run.spec else []
    latest = Group.objects.filter(run=run).order_by("-step", "-seq").first()
    numbers = {k for extra in latest.rollouts.values_list("extra", flat=True) for k, v in extra.items()
               if isinstance(v, (int, float)) and not isinstance(v, bool)} if latest else set()
    return [*INDEXED_ORDERS, *declared, *sorted(k for k in numbers - set(declared) if set(k) <= EXTRA_KEY_CHARS)]


@dataclass
class Page:
    results: list[dict]
    next_cursor: str | None
    # a text search only: rollouts whose text the search could not read (text_search.matching), None otherwise
    text_not_searched: int | None = None
    # how many rollouts match in all (not only after the cursor), counted up to COUNT_MAX + 1; None: not counted
    matched: int | None = None

    @property
    def count(self) -> int | None:
        return None if self.matched is None else min(self.matched, COUNT_MAX)

    @property
    def count_exact(self) -> bool:
        """False: more than `count` rollouts match."""
        return self.matched is not None and self.matched <= COUNT_MAX

    def text_index_json(self) -> dict | None:
        """What the API says of a text search's reach: {"not_searched": N, "exact": bool}, None without `q`."""
        if self.text_not_searched is None:
            return None
        capped = self.text_not_searched > text_search.UNREAD_COUNT_CAP
        return {"not_searched": min(self.text_not_searched, text_search.UNREAD_COUNT_CAP), "exact": not capped}


def search(run_id: int, params, count: bool = True) -> Page:
    """One page of the run's rollouts matching `params` (a QueryDict or dict of strings) and, with `count`,
    how many match (up to COUNT_MAX + 1)."""
    order = params.get("order") or "step"
    descending, field = order.startswith("-"), order.lstrip("-")
    if field not in INDEXED_ORDERS and not (field and set(field) <= EXTRA_KEY_CHARS):
        raise FieldError("order", f"order must be a field ({', '.join(INDEXED_ORDERS)}) or a method extra "
                                   f"such as novelty, optionally with '-', not {order!r}")
    limit = _integer(params, "limit", DEFAULT_LIMIT)
    if not 1 <= limit <= MAX_LIMIT:
        raise FieldError("limit", f"limit must be between 1 and {MAX_LIMIT}, not {limit}")

    filters = _filters(params)
    run = Run.objects.only("method", "last_step").get(pk=run_id)
    rows = Rollout.objects.filter(run_id=run_id, **filters)
    prompt_text = (params.get("prompt_text") or "").strip()
    if prompt_text:
        rows = rows.filter(group__prompt_id__in=_prompts_saying(run_id, prompt_text))
    q = (params.get("q") or "").strip()
    not_searched = None
    matched = None
    if q:
        _words("q", q)
        condition, not_searched = text_search.matching(run_id, q, limit + 1)
        if count:
            # the count's own condition: matching() picks how to read the index by how many rows are wanted,
            # and walking rollouts one by one until COUNT_MAX + 1 match could pass most of a large run
            counted, _ = text_search.matching(run_id, q, COUNT_MAX + 1)
            matched = rows.filter(counted).order_by()[:COUNT_MAX + 1].count()
        rows = rows.filter(condition)
    elif count:
        matched = rows.order_by()[:COUNT_MAX + 1].count()  # any COUNT_MAX + 1 rows: no order to sort by
    if field in INDEXED_ORDERS:
        key = F(field)
    else:
        rows, key = _order_by_extra(run, field, rows, filters)
        rows = rows.annotate(sort_key=key)
        key = F("sort_key")
    nullable = field in NULLABLE or field not in INDEXED_ORDERS
    cursor = _decode(params.get("cursor"))
    sort = key
    if field != "step" and _few_steps(run.last_step, filters.get("step__gte"), filters.get("step__lte")):
        # A few steps' rollouts are best read through the step index and sorted; PostgreSQL's planner
        # walked the whole run's novelty index instead (0.2 s for 10 steps of 1,953). "+ 0" leaves
        # the order as it is and hides it from the order's own index.
        sort = ExpressionWrapper(key + Value(0), output_field=FloatField())
    if nullable:  # as the index holds them: missing values lowest on both databases
        first = sort.desc(nulls_last=True) if descending else sort.asc(nulls_first=True)
    else:
        first = sort.desc() if descending else sort.asc()
    ordering = [first, F("id").desc() if descending else F("id").asc()]
    rows = rows.annotate(prompt_id=F("group__prompt_id")).order_by(*ordering)
    found = []
    for region in _regions(key.name, cursor, descending, nullable):
        found += rows.filter(region)[:limit + 1 - len(found)]
        if len(found) > limit:
            break
    next_cursor = None
    if len(found) > limit:  # a row past the page: another page follows the page's last row
        found = found[:limit]
        last = found[-1]
        next_cursor = _encode(getattr(last, field) if field in INDEXED_ORDERS else last.sort_key, last.pk)
    return Page(results=[{"step": r.step, "prompt_id": r.prompt_id, **r.to_json()} for r in found],
                next_cursor=next_cursor, text_not_searched=not_searched, matched=matched)


def _order_by_extra(run: Run, name: str, rows, filters: dict):
    """(rows, the expression to sort them by) for an order by the extra `name`.

    One of the run's method's search extras is read through its partial index
    (search_indexes.py): the expression is the index's, and the rows are narrowed by the index's condition,
    which every rollout of the run meets (ingestion gives each the key). Any other extra has no index for
    this run: its rollouts are sorted, so at most SEARCH_UNINDEXED_SORT_MAX of them, counted over the
    step range alone (a count under other filters could read the whole run to find few)."""
    if search_indexes.has_extra_indexes(connection) and run.spec and name in run.spec.search_extras:
        column = f"{bulk.quoted(Rollout._meta.db_table)}.{bulk.quoted('extra')}"
        # the index's condition as the index writes it (a bound parameter would not match it on SQLite)
        carries = RawSQL(search_indexes.has_extra(column, name, connection.vendor), [], output_field=BooleanField())
        return rows.filter(carries), _numeric_extra(name)
    cap = settings.SEARCH_UNINDEXED_SORT_MAX
    steps = {lookup: value for lookup, value in filters.items() if lookup.startswith("step__")}
    if Rollout.objects.filter(run_id=run.pk, **steps)[:cap + 1].count() > cap:
        indexed = [*INDEXED_ORDERS, *(run.spec.search_extras if run.spec and search_indexes.has_extra_indexes(connection)
                                      else ())]
        raise FieldError("order", f"order {name!r} has no index for this run: a search ordered by it sorts at most "
                                   f"{cap:,} rollouts, and this one spans more; narrow it with step_min and step_max, "
                                   f"or order by one of {', '.join(indexed)}")
    return rows, _numeric_extra(name)


def _numeric_extra(name: str) -> RawSQL:
    """The extra `name` as a float where it is a JSON number, else null (a cast of true or "high" would fail)."""
    column = f"{bulk.quoted(Rollout._meta.db_table)}.{bulk.quoted('extra')}"
    # the very expression of the search extras' indexes; `name` is a plain name (EXTRA_KEY_CHARS)
    return RawSQL(search_indexes.numeric_extra(column, name, connection.vendor), [], output_field=FloatField())


def _few_steps(last_step: int | None, low: int | None, high: int | None) -> bool:
    """Whether the search's step range [low, high] holds at most FEW_STEPS_SHARE of the run's steps."""
    if low is None and high is None:
        return False
    last = last_step or 0
    low, high = max(low if low is not None else 0, 0), min(high if high is not None else last, last)
    return high - low + 1 <= max(1, last * FEW_STEPS_SHARE)


def _prompts_saying(run_id: int, text: str) -> list[str]:
    """The ids of the run's prompts whose text has every word of `text` (the prompt set's rows and, for
    R-Zero, the generated questions): a prompt set is thousands of rows, not millions, so read directly."""
    terms = _words("prompt_text", text)
    prompts = Prompt.objects.filter(prompt_set__runs=run_id)
    questions = RZeroQuestion.objects.filter(run_id=run_id)
    for term in terms:  # a substring narrows, the word rule decides below
        prompts, questions = prompts.filter(text__icontains=term), questions.filter(question__icontains=term)
    found = list(prompts.values_list("external_id", "text")) + list(questions.values_list("question_id", "question"))
    wanted = set(terms)
    ids = sorted({pid for pid, body in found if wanted <= set(text_search.words(body or ""))})
    if len(ids) > MAX_PROMPTS_MATCHED:
        raise FieldError("prompt_text", f"prompt_text {text!r} matches {len(ids)} prompts, more than "
                                         f"{MAX_PROMPTS_MATCHED}: add a word")
    return ids


def _words(name: str, text: str) -> list[str]:
    if len(text) > MAX_QUERY_CHARS:
        raise FieldError(name, f"{name} must be at most {MAX_QUERY_CHARS} characters, not {len(text)}")
    terms = text_search.words(text)
    if not terms:
        raise FieldError(name, f"{name} must contain a word to search for, not {text!r}")
    return terms


def _filters(params) -> dict:
    out = {}
    for name, lookup in (("step_min", "step__gte"), ("step_max", "step__lte")):
        if params.get(name) not in (None, ""):
            out[lookup] = _integer(params, name, None)
    for name, lookup in (("reward_min", "reward__gte"), ("reward_max", "reward__lte")):
        if params.get(name) not in (None, ""):
            out[lookup] = _number(params, name)
    for field in ("step", "reward"):  # an empty range is a mistake in the filter, not a search that found nothing
        low, high = out.get(f"{field}__gte"), out.get(f"{field}__lte")
        if low is not None and high is not None and low > high:
            raise FieldError(f"{field}_max", f"{field}_max {plain_number(high)} is below {field}_min "
                                             f"{plain_number(low)}: no rollout can match")
    if params.get("prompt") not in (None, ""):
        out["group__prompt_id"] = params["prompt"]
    if params.get("answer") not in (None, ""):
        out["answer"] = params["answer"]
    for name, column in BOOLEANS.items():
        value = (params.get(name) or "").strip().lower()
        if value in TRUE:
            out[column] = True
        elif value in FALSE:
            out[column] = False
        elif value:
            raise FieldError(name, f"{name} must be true or false, not {params.get(name)!r}")
    # the rollouts of steps run again after a resume replace the earlier attempt's; superseded=true shows those
    out.setdefault("superseded", False)
    return out


def _integer(params, name: str, default):
    text = params.get(name)
    if text in (None, ""):
        return default
    number = whole_number(str(text).strip())
    if number is None:
        raise FieldError(name, f"{name} must be a whole number of at most {MAX_DIGITS} digits, not {text!r}")
    return number


def _number(params, name: str) -> float:
    text = params.get(name)
    try:
        value = float(text)
    except ValueError:
        raise FieldError(name, f"{name} must be a number, not {text!r}") from None
    if not math.isfinite(value):
        raise FieldError(name, f"{name} must be a finite number, not {text!r}")
    return value


def _regions(name: str, cursor, descending: bool, nullable: bool) -> list[Q]:
    """The rows after the cursor (value, id), as conditions read one after the other, each one range of
    the order's (run, field, id) index: the rows with a value and those without (which sort lowest:
    last descending, first ascending). The rows with a value are bounded by the field itself
    (`field <= value`, then the tie on id), so the index walk starts at the cursor instead of passing
    every row before it."""
    later = "lt" if descending else "gt"
    has_value, missing = Q(**{f"{name}__isnull": False}), Q(**{f"{name}__isnull": True})
    if cursor is None:
        present, absent = (has_value if nullable else Q()), missing
    elif cursor[0] is None:  # among the missing values
        absent = missing & Q(**{f"id__{later}": cursor[1]})
        return [absent] if descending else [absent, has_value]
    else:
        value, pk = cursor
        if name in INDEXED_ORDERS:  # a row comparison: the index walk starts at (value, id) itself
            table, op = Rollout._meta.db_table, "<" if descending else ">"
            present = Q(RawSQL(f"({bulk.quoted(table)}.{bulk.quoted(name)}, {bulk.quoted(table)}.{bulk.quoted('id')}) "
                               f"{op} (%s, %s)", [value, pk], output_field=BooleanField()))
        else:
            present = Q(**{f"{name}__{'lte' if descending else 'gte'}": value}) & (
                Q(**{f"{name}__{later}": value}) | Q(**{name: value, f"id__{later}": pk}))
        absent = missing if descending else None  # ascending, the missing values came before the cursor
    if not nullable:
        return [present]
    return [r for r in ([present, absent] if descending else [absent, present]) if r is not None]


def _encode(value, pk: int) -> str:
    return base64.urlsafe_b64encode(json.dumps([value, pk]).encode()).decode().rstrip("=")


def _decode(text: str | None):
    if not text:
        return None
    try:
        value, pk = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        if not isinstance(pk, int) or not (value is None or isinstance(value, (int, float))):
            raise ValueError
    except (ValueError, TypeError, UnicodeDecodeError):
        raise FieldError("cursor", f"cursor {text!r} is not one this search returned") from None
    return value, pk

"""Ordering a run's search by a method extra (issues 23 and 35): the run's method's search extras through their
indexes on PostgreSQL and SQLite (webapp/explorer/search_indexes.py), any other extra sorted over a bounded
range."""
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import make_prompt_set, search_every_page
from webapp.explorer import search_indexes
from webapp.runs.ingestion import ingest_events
from webapp.runs.models import Rollout, Run
from webapp.explorer.search import EXTRA_KEY_CHARS, search, search_orders

pytestmark = pytest.mark.django_db


def group_events(extras: list[dict], steps=(1,), first_seq=0) -> list[dict]:
    events, seq = [], first_seq
    for step in steps:
        events.append({"seq": seq, "time": 1.7e9 + seq, "type": "group", "step": step, "prompt_id": "p1",
                       "majority_answer": "1", "similarity": None,
                       "rollouts": [{"index": i, "text": f"rollout {i}", "answer": "1", "valid": True, "reward": 1.0,
                                     "extra": extra} for i, extra in enumerate(extras)]})
        seq += 1
    return events


def make_run(user, method: str, extras: list[dict], steps=(1,)) -> Run:
    run = Run.objects.create(name="r", method=method, prompt_set=make_prompt_set(user), max_steps=10, created_by=user)
    ingest_events(run, group_events(extras, steps))
    return run


def needs_postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("reads PostgreSQL's plans (SQLite's: test_a_methods_search_extra_orders_a_run_of_any_size_...)")


def plan_of_the_page_query(run, params) -> str:
    """PostgreSQL's plan for the query that reads the search's page, with every other path priced out: the
    index's name is in it only if the index can serve that query (expression and condition both match)."""
    with CaptureQueriesContext(connection) as queries:
        search(run.pk, params)
    page = [q["sql"] for q in queries.captured_queries if "ORDER BY" in q["sql"] and "runs_rollout" in q["sql"]][0]
    with connection.cursor() as cursor:
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            cursor.execute(f"SET LOCAL {setting} = off")
        cursor.execute("EXPLAIN " + page)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_every_methods_search_extra_has_a_partial_index():
    assert search_indexes.SEARCH_EXTRAS and all(set(key) <= EXTRA_KEY_CHARS for key in search_indexes.SEARCH_EXTRAS)
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND name LIKE 'rollout_extra_%'")
        else:
            cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE indexname LIKE 'rollout_extra_%%'")
        definitions = dict(cursor.fetchall())
    for key in search_indexes.SEARCH_EXTRAS:
        condition = (f"""WHERE json_type(extra, '$."{key}"') IS NOT NULL""" if connection.vendor == "sqlite"
                     else f"WHERE (extra ? '{key}'::text)")
        assert condition in definitions[search_indexes.extra_index_name(key)]
    # the index of 0009 held every rollout of every method; the partial one replaced it
    assert "rollout_search_extra_novelty" not in definitions


@pytest.mark.parametrize("method, key", [("evol_rl", "novelty"), ("evol_rl", "mean_similarity"),
                                         ("compass", "confidence"), ("darl", "r_ref")])
def test_a_search_ordered_by_its_methods_search_extra_reads_that_extras_index(user, method, key):
    needs_postgresql()
    run = make_run(user, method, [{key: 0.1 * i} for i in range(6)])
    assert f"rollout_extra_{key}" in plan_of_the_page_query(run, {"order": f"-{key}"})
    first = search(run.pk, {"order": f"-{key}", "limit": "2"})
    assert f"rollout_extra_{key}" in plan_of_the_page_query(run, {"order": f"-{key}", "limit": "2",
                                                                  "cursor": first.next_cursor})


def test_ingestion_gives_each_rollout_its_methods_search_extras(user):
    run = make_run(user, "evol_rl", [{"novelty": 1}, {}, {"novelty": "high", "mean_similarity": True},
                                     {"novelty": 10 ** 400, "note": "kept"}, {"novelty": float("nan")}])
    stored = list(Rollout.objects.filter(run=run).order_by("index").values_list("extra", flat=True))
    assert stored == [{"novelty": 1, "mean_similarity": None}, {"novelty": None, "mean_similarity": None},
                      {"novelty": "high", "mean_similarity": True},
                      {"novelty": None, "mean_similarity": None, "note": "kept"},  # past a float's range
                      {"novelty": None, "mean_similarity": None}]
    # another method's rollouts keep their extras as reported, a key of an index with a word for a value
    # included (the index's expression once failed their whole ingestion)
    other = make_run(user, "ttrl", [{"novelty": "high", "confidence": True}, {}])
    assert list(Rollout.objects.filter(run=other).order_by("index").values_list("extra", flat=True)) == [
        {"novelty": "high", "confidence": True}, {}]
    # what is not a number sorts as missing
    assert [r["index"] for r in search(run.pk, {"order": "-novelty"}).results] == [0, 4, 3, 2, 1]


def test_rollouts_reported_without_the_extra_are_found_last_in_its_order(api_client, user):
    run = make_run(user, "evol_rl", [{"novelty": 0.5}, {}, {"novelty": 0.9}, {"novelty": None}, {"novelty": 0.1}])
    results, _ = search_every_page(api_client, run, order="-novelty", limit=2)
    assert [r["index"] for r in results] == [2, 0, 4, 3, 1]  # the missing ones last, by id as the order goes
    results, _ = search_every_page(api_client, run, order="novelty", limit=2)
    assert [r["index"] for r in results] == [1, 3, 4, 0, 2]


def test_the_migration_gives_rollouts_stored_before_it_their_methods_search_extras(user):
    run = make_run(user, "compass", [{"confidence": 0.5, "credibility": 0.2}, {"confidence": 0.7, "credibility": 0.1}])
    # as stored before: a rollout without a key
    Rollout.objects.filter(run=run, index=0).update(extra={"credibility": 0.2})
    assert [r["index"] for r in search(run.pk, {"order": "-confidence"}).results] == [1]  # not in the index
    search_indexes.give_rollouts_their_search_extras(connection)  # what migration runs/0016 does first
    assert list(Rollout.objects.filter(run=run).order_by("index").values_list("extra", flat=True)) == [
        {"credibility": 0.2, "confidence": None}, {"confidence": 0.7, "credibility": 0.1}]
    assert [r["index"] for r in search(run.pk, {"order": "-confidence"}).results] == [1, 0]


def test_an_order_without_an_index_is_refused_past_the_limit_naming_it_and_the_way_out(api_client, user, settings):
    settings.SEARCH_UNINDEXED_SORT_MAX = 10
    run = make_run(user, "ttrl", [{"score": float(i)} for i in range(4)], steps=(1, 2, 3))  # 12 rollouts
    response = api_client.get(f"/api/runs/{run.pk}/rollouts/search", {"order": "-score"})
    assert response.status_code == 400
    error = response.json()
    assert error["field"] == "order"
    assert "'-score'" not in error["error"] and "'score' has no index" in error["error"]
    assert "at most 10 rollouts" in error["error"] and "step_min and step_max" in error["error"]
    export = api_client.get(f"/api/runs/{run.pk}/rollouts/export", {"order": "-score", "format": "csv"})
    assert export.status_code == 400 and "'score' has no index" in export.json()["error"]
    # over a step range of 8 rollouts it sorts them
    results, _ = search_every_page(api_client, run, order="-score", step_min=2, limit=3)
    # ties by id, descending: step 3's rollout before step 2's
    assert [(r["extra"]["score"], r["step"]) for r in results] == [(s, step) for s in (3.0, 2.0, 1.0, 0.0)
                                                                       for step in (3, 2)]


def test_an_extra_that_is_not_always_a_number_orders_its_numbers_and_treats_the_rest_as_missing(api_client, user):
    # a cast of true or "high" to a number fails on PostgreSQL: the search answered 500
    run = make_run(user, "ttrl", [{"flag": True}, {"flag": 0.5}, {"flag": "high"}, {"flag": 2}, {"flag": None}])
    results, _ = search_every_page(api_client, run, order="-flag", limit=2)
    assert [r["index"] for r in results] == [3, 1, 4, 2, 0]  # the missing last, by id as the order goes


def test_the_orders_offered_are_the_methods_search_extras_then_the_other_numbers_of_the_latest_step(user):
    run = make_run(user, "evol_rl", [{"novelty": 0.1, "novelty_raw": 0.2, "flag": True, "label": "a", "w eird": 1}])
    assert search_orders(run) == ["step", "reward", "advantage", "length", "novelty", "mean_similarity", "novelty_raw"]
    assert search_orders(make_run(user, "ttrl", [])) == ["step", "reward", "advantage", "length"]


def sqlite_plan_of_the_page_query(run, params) -> str:
    with CaptureQueriesContext(connection) as queries:
        search(run.pk, params)
    page = [q["sql"] for q in queries.captured_queries if "ORDER BY" in q["sql"] and "runs_rollout" in q["sql"]][0]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + page)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


@pytest.mark.parametrize("method, key", [("compass", "confidence"), ("evol_rl", "novelty"), ("empo", "class_share")])
def test_a_methods_search_extra_orders_a_run_of_any_size_on_either_database(api_client, user, settings, method, key):
    """SQLite (the demo's database) had no index for any extra: an order by COMPASS's confidence was refused past
    SEARCH_UNINDEXED_SORT_MAX rollouts. Its expression indexes serve it now, every page."""
    settings.SEARCH_UNINDEXED_SORT_MAX = 10
    run = make_run(user, method, [{key: 0.1 * i} for i in range(4)], steps=(1, 2, 3))  # 12 rollouts
    results, pages = search_every_page(api_client, run, order=f"-{key}", limit=5)
    assert pages == 3 and [(r["extra"][key], r["step"]) for r in results] == [
        (0.1 * i, step) for i in (3, 2, 1, 0) for step in (3, 2, 1)]
    if connection.vendor == "sqlite":
        first = search(run.pk, {"order": f"-{key}", "limit": "5"})
        for params in ({"order": f"-{key}"}, {"order": f"-{key}", "limit": "5", "cursor": first.next_cursor}):
            assert f"rollout_extra_{key}" in sqlite_plan_of_the_page_query(run, params)

"""GET /api/runs/{id}/rollouts/search (DESIGN §4.6): filters, orders, keyset pages, text."""
import pytest

from tests.factories import SEARCH_WORDS as WORDS, search_every_page

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(searched_run):
    return searched_run


def search(client, run, **params):
    response = client.get(f"/api/runs/{run.pk}/rollouts/search", params)
    assert response.status_code == 200, response.content
    return response.json()


every_page = search_every_page


def key(row, field):
    return row[field] if field in row else row["extra"].get(field)


@pytest.mark.parametrize("order", ["step", "-step", "reward", "-reward", "advantage", "-advantage", "length", "-length",
                                   "novelty", "-novelty"])
def test_pages_hold_every_rollout_once_in_the_order_asked(api_client, run, order):
    results, pages = every_page(api_client, run, order=order, limit=5)
    assert pages == 5  # 24 rollouts, 5 a page
    assert sorted((r["step"], r["prompt_id"], r["index"]) for r in results) == sorted(
        (s, p, i) for s in (1, 2, 3) for p in ("p1", "p2") for i in range(4))
    field, descending = order.lstrip("-"), order.startswith("-")
    values = [key(r, field) for r in results]
    lowest = float("-inf")  # a missing value sorts lowest
    ranked = [lowest if v is None else v for v in values]
    assert ranked == sorted(ranked, reverse=descending)


def test_each_result_names_its_step_prompt_and_index_with_the_rollout_fields(api_client, run):
    first = search(api_client, run, limit=1)["results"][0]
    assert (first["step"], first["prompt_id"], first["index"]) == (1, "p1", 0)
    assert first["text"] == "step 1: carry the one \\boxed{1}" and first["answer"] == "1"
    assert {"valid", "in_majority", "reward", "advantage", "length", "used_for_training", "entropy", "extra"} <= first.keys()


def test_filters_narrow_the_search(api_client, run):
    def found(**params):
        return sorted((r["step"], r["prompt_id"], r["index"]) for r in every_page(api_client, run, **params)[0])

    assert {s for s, _, _ in found(step_min=2, step_max=2)} == {2}
    assert {p for _, p, _ in found(prompt="p2")} == {"p2"}
    assert found(answer="1") == sorted((s, p, i) for s in (1, 2, 3) for p in ("p1", "p2") for i in range(4)
                                       if (s + i) % 3 == 1)
    assert {i for _, _, i in found(in_majority="true")} == {0, 2} and {i for _, _, i in found(in_majority="false")} == {1, 3}
    assert {i for _, _, i in found(valid="false")} == {3} and {i for _, _, i in found(trained="no")} == {3}
    rewards = [r["reward"] for r in every_page(api_client, run, reward_min=0.25, reward_max=0.5)[0]]
    assert rewards and all(0.25 <= r <= 0.5 for r in rewards)


def texts_found(client, run, q, **params):
    return sorted(r["text"] for r in every_page(client, run, q=q, **params)[0])


def expected_texts(holds):
    return sorted(t for t in (f"step {s}: {WORDS[i % 4]} \\boxed{{{s + i}}}" for s in (1, 2, 3) for _ in ("p1", "p2")
                              for i in range(4)) if holds(t))


@pytest.fixture(params=["rare", "common"])
def strategy(request, monkeypatch):
    """Both ways the index is read (text_search.matching): matches first, or per row along the order."""
    from webapp.explorer import text_search

    if request.param == "common":
        monkeypatch.setattr(text_search, "COMMON_PER_ROW", 0)  # every query counts as common


@pytest.fixture(params=["indexed", "not indexed yet", "half indexed"])
def text_indexed(request, run, strategy):
    """The run's texts wholly, not or partly in the text index: a search finds the same either way."""
    from webapp.explorer import text_search

    if request.param == "indexed":
        assert text_search.catch_up_fully(run.pk) == 24
    elif request.param == "half indexed":
        assert text_search.catch_up(run.pk, limit=10) == 10
    return run


def test_text_search_finds_rollouts_holding_every_word_in_any_case_and_order(api_client, text_indexed):
    run = text_indexed
    assert texts_found(api_client, run, "Answer is BOXED") == expected_texts(lambda t: "the answer is boxed" in t)
    assert texts_found(api_client, run, "boxed answer") == expected_texts(lambda t: "the answer is boxed" in t)
    assert texts_found(api_client, run, "\\boxed{5}") == expected_texts(lambda t: t.endswith("{5}"))
    assert texts_found(api_client, run, "multiply", step_min=3) == expected_texts(
        lambda t: "multiply" in t and t.startswith("step 3"))
    assert texts_found(api_client, run, "multiply", order="-reward") == expected_texts(lambda t: "multiply" in t)


def test_text_search_matches_whole_words_only(api_client, text_indexed):
    assert texts_found(api_client, text_indexed, "multip") == []
    assert texts_found(api_client, text_indexed, "seven eleven") == []  # every word must be there


@pytest.mark.parametrize("indexed", [True, False])
def test_a_word_is_a_run_of_letters_and_digits_whatever_surrounds_it(api_client, user, indexed, strategy):
    from tests.factories import make_prompt_set
    from webapp.explorer import text_search
    from webapp.runs.models import Run
    from webapp.runs.ingestion import ingest_events

    run = Run.objects.create(name="words", method="ttrl", prompt_set=make_prompt_set(user), max_steps=1, created_by=user)
    text = '<b>Bold</b> <img src=x onerror="alert(1)"> x^2+3.14 e-mail naïve'
    ingest_events(run, [{"seq": 0, "time": 1.8e9, "type": "group", "step": 1, "prompt_id": "p1", "majority_answer": "0",
                         "similarity": None, "rollouts": [{"index": 0, "text": text, "answer": "0"}]}])
    if indexed:
        text_search.catch_up_fully(run.pk)
    for q in ("bold", "ONERROR alert", "3.14", "14 3 x", "mail e", "naïve", "b"):
        assert texts_found(api_client, run, q) == [text], q
    for q in ("bol", "3.15", "email", "naive"):
        assert texts_found(api_client, run, q) == [], q


def test_prompt_text_finds_the_rollouts_of_prompts_holding_its_words(api_client, run):
    from webapp.prompts.models import Prompt

    Prompt.objects.filter(prompt_set=run.prompt_set, external_id="p2").update(text="How many Apples are left?")
    found = every_page(api_client, run, prompt_text="apples LEFT")[0]
    assert len(found) == 12 and {r["prompt_id"] for r in found} == {"p2"}
    assert every_page(api_client, run, prompt_text="apple")[0] == []  # whole words only
    response = api_client.get(f"/api/runs/{run.pk}/rollouts/search", {"prompt_text": "?!"})
    assert response.status_code == 400 and response.json()["field"] == "prompt_text"


def test_text_search_indexes_what_ingestion_adds_later(api_client, run):
    from webapp.explorer import text_search
    from webapp.runs.ingestion import ingest_events

    text_search.catch_up_fully(run.pk)
    ingest_events(run, [{"seq": 100, "time": 1.8e9, "type": "group", "step": 4, "prompt_id": "p1", "majority_answer": "0",
                         "similarity": None, "rollouts": [{"index": 0, "text": "step 4: multiply again \\boxed{8}",
                                                          "answer": "8", "valid": True, "in_majority": True}]}])
    assert len(texts_found(api_client, run, "multiply")) == 7  # the new one read from its text
    assert text_search.catch_up(run.pk) == 1 and text_search.catch_up(run.pk) == 0
    assert len(texts_found(api_client, run, "multiply")) == 7  # and from the index: once


@pytest.mark.parametrize("params, field", [
    ({"limit": "0"}, "limit"), ({"limit": "1001"}, "limit"), ({"limit": "ten"}, "limit"),
    ({"order": "rew@rd"}, "order"), ({"cursor": "not-a-cursor"}, "cursor"), ({"step_min": "²"}, "step_min"),
    ({"reward_min": "inf"}, "reward_min"), ({"q": "+++"}, "q"), ({"q": "x" * 1001}, "q"), ({"reward_max": "1e400"}, "reward_max"), ({"valid": "maybe"}, "valid"),
])
def test_a_bad_parameter_is_a_400_naming_it(api_client, run, params, field):
    response = api_client.get(f"/api/runs/{run.pk}/rollouts/search", params)
    assert response.status_code == 400 and response.json()["field"] == field
    value = next(iter(params.values()))
    assert repr(value) in response.json()["error"] or field == "limit" or len(value) > 1000


@pytest.mark.parametrize("low, high", [("step_min", "step_max"), ("reward_min", "reward_max")])
def test_a_range_whose_minimum_is_above_its_maximum_is_a_400_naming_the_maximum_not_no_match(api_client, run, low,
                                                                                             high):
    response = api_client.get(f"/api/runs/{run.pk}/rollouts/search", {low: "2", high: "1"})
    assert response.status_code == 400 and response.json()["field"] == high
    assert response.json()["error"] == f"{high} 1 is below {low} 2: no rollout can match"
    equal = api_client.get(f"/api/runs/{run.pk}/rollouts/search", {low: "1", high: "1"})  # one value: a real range
    assert equal.status_code == 200


def test_a_text_search_reads_a_bounded_number_of_unindexed_texts_and_says_how_many_it_did_not(api_client, run,
                                                                                            settings, strategy):
    from webapp.explorer import text_search
    from webapp.runs.models import Rollout

    settings.TEXT_SEARCH_UNINDEXED_MAX = 10  # a supervisor restarted on a large run: the index far behind
    by_id = list(Rollout.objects.filter(run=run).order_by("id").values_list("text", flat=True))
    results, _ = every_page(api_client, run, q="boxed", limit=5)
    assert sorted(r["text"] for r in results) == sorted(t for t in by_id[:10] if "boxed" in t)  # the 10 it read
    body = search(api_client, run, q="boxed")
    assert body["text_index"] == {"not_searched": 14, "exact": True}
    text_search.catch_up(run.pk, limit=10)  # the next 10 read from their texts, the first from the index
    assert search(api_client, run, q="boxed")["text_index"] == {"not_searched": 4, "exact": True}
    assert sorted(r["text"] for r in every_page(api_client, run, q="boxed", limit=50)[0]) == sorted(
        t for t in by_id[:20] if "boxed" in t)
    text_search.catch_up_fully(run.pk)
    assert search(api_client, run, q="boxed")["text_index"] == {"not_searched": 0, "exact": True}
    assert "text_index" not in search(api_client, run, step_min=1)  # only a text search has a reach to tell


def test_how_many_were_not_searched_is_counted_up_to_a_cap(api_client, run, settings, monkeypatch):
    from webapp.explorer import text_search

    settings.TEXT_SEARCH_UNINDEXED_MAX = 4
    monkeypatch.setattr(text_search, "UNREAD_COUNT_CAP", 5)
    assert search(api_client, run, q="boxed")["text_index"] == {"not_searched": 5, "exact": False}


def test_the_answer_says_how_many_rollouts_match_on_every_page(api_client, run):
    assert search(api_client, run)["count"] == 24 and search(api_client, run)["count_exact"] is True
    first = search(api_client, run, in_majority="true", limit=5)
    assert (first["count"], first["count_exact"]) == (12, True) and len(first["results"]) == 5
    later = search(api_client, run, in_majority="true", limit=5, cursor=first["next_cursor"])
    assert later["count"] == 12  # all the search's matches, not those after the cursor
    assert search(api_client, run, q="multiply")["count"] == 6
    assert search(api_client, run, answer="none such")["count"] == 0


def test_a_count_past_the_cap_stops_there_and_says_more_than(api_client, run, monkeypatch):
    from webapp.explorer import search as search_module

    monkeypatch.setattr(search_module, "COUNT_MAX", 10)  # counted with LIMIT 11: cheap however many match
    body = search(api_client, run)
    assert (body["count"], body["count_exact"]) == (10, False)
    assert (search(api_client, run, step_min=3)["count"], search(api_client, run, step_min=3)["count_exact"]) == (8, True)
    assert search(api_client, run, q="boxed")["count_exact"] is False


def test_an_unknown_parameter_is_a_400_naming_it_and_the_ones_it_takes(api_client, run):
    # `step=40` is not a filter (step_min and step_max are): before, it was ignored and every step came back
    response = api_client.get(f"/api/runs/{run.pk}/rollouts/search", {"step": "40"})
    assert response.status_code == 400 and response.json()["field"] == "step"
    assert "'step'" in response.json()["error"] and "step_min" in response.json()["error"]


@pytest.mark.parametrize("indexed", [True, False])
def test_a_word_longer_than_the_index_takes_does_not_stop_the_run_s_text_search(api_client, user, indexed, strategy):
    """Degenerate output writes words of thousands of letters; PostgreSQL's index takes words of at most 2,047
    bytes, and one longer word failed the indexing task on every retry and every text search of the run."""
    from tests.factories import make_prompt_set
    from webapp.explorer import text_search
    from webapp.runs.models import Run
    from webapp.runs.ingestion import ingest_events

    run = Run.objects.create(name="words", method="ttrl", prompt_set=make_prompt_set(user), max_steps=1, created_by=user)
    texts = ["see " + "a" * 2048, "see " + "é" * 1100 + " later", "see nothing long"]
    ingest_events(run, [{"seq": 0, "time": 1.8e9, "type": "group", "step": 1, "prompt_id": "p1", "majority_answer": "0",
                         "similarity": None, "rollouts": [{"index": i, "text": t, "answer": "0"} for i, t in enumerate(texts)]}])
    if indexed:
        assert text_search.catch_up_fully(run.pk) == 3
    assert texts_found(api_client, run, "see") == sorted(texts)
    assert texts_found(api_client, run, "later") == [texts[1]]
    exported = api_client.get(f"/api/runs/{run.pk}/rollouts/export", {"format": "jsonl", "q": "see"})
    assert exported.status_code == 200 and len(b"".join(exported.streaming_content).splitlines()) == 3

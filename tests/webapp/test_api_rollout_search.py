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


def test_text_search_finds_rollouts_holding_the_text_in_any_case(api_client, run):
    texts = [r["text"] for r in every_page(api_client, run, q="Answer is BOXED")[0]]
    assert len(texts) == 6 and all("the answer is boxed" in t for t in texts)
    assert [r["text"] for r in every_page(api_client, run, q="\\boxed{5}")[0]] == [
        t for t in (f"step {s}: {WORDS[i % 4]} \\boxed{{{s + i}}}" for s in (1, 2, 3) for _ in ("p1", "p2")
                    for i in range(4)) if t.endswith("{5}")]
    assert every_page(api_client, run, q="100%_")[0] == []  # LIKE's wildcards are text here
    assert len(every_page(api_client, run, q="multiply", step_min=3)[0]) == 2


@pytest.mark.parametrize("params, field", [
    ({"limit": "0"}, "limit"), ({"limit": "1001"}, "limit"), ({"limit": "ten"}, "limit"),
    ({"order": "rew@rd"}, "order"), ({"cursor": "not-a-cursor"}, "cursor"), ({"step_min": "²"}, "step_min"),
    ({"reward_min": "inf"}, "reward_min"), ({"reward_max": "1e400"}, "reward_max"), ({"valid": "maybe"}, "valid"),
])
def test_a_bad_parameter_is_a_400_naming_it(api_client, run, params, field):
    response = api_client.get(f"/api/runs/{run.pk}/rollouts/search", params)
    assert response.status_code == 400 and response.json()["field"] == field
    assert repr(next(iter(params.values()))) in response.json()["error"] or field == "limit"

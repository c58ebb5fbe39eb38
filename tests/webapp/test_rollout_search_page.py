"""/runs/{id}/rollouts/search/: the search's results as a page, a keyset page at a time."""
import re

import pytest

pytestmark = pytest.mark.django_db


def test_it_lists_the_matching_rollouts_and_links_the_next_page_and_the_export(signed_in, searched_run):
    run = searched_run
    page = signed_in.get(f"/runs/{run.pk}/rollouts/search/", {"q": "multiply", "limit": "4", "order": "-step"})
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count('<tr class="result"') == 4
    assert re.findall(r'data-step="(\d)"', html) == ["3", "3", "2", "2"]
    next_link = re.search(r'id="next-page" href="\?([^"]+)"', html).group(1).replace("&amp;", "&")
    assert "q=multiply" in next_link and "cursor=" in next_link
    assert f'href="/api/runs/{run.pk}/rollouts/export?format=csv&amp;q=multiply&amp;order=-step"' in html
    rest = signed_in.get(f"/runs/{run.pk}/rollouts/search/?{next_link}").content.decode()
    assert re.findall(r'data-step="(\d)"', rest) == ["1", "1"] and 'id="next-page"' not in rest
    assert 'id="first-page"' in rest


def test_a_bad_filter_is_a_400_naming_it_with_the_form_kept(signed_in, searched_run):
    page = signed_in.get(f"/runs/{searched_run.pk}/rollouts/search/", {"reward_min": "lots", "q": "carry"})
    assert page.status_code == 400
    html = page.content.decode()
    assert 'data-field="reward_min"' in html and "&#x27;lots&#x27;" in html and 'value="carry"' in html


def test_an_impossible_step_range_is_an_error_on_the_max_field_not_no_match(signed_in, searched_run):
    page = signed_in.get(f"/runs/{searched_run.pk}/rollouts/search/", {"step_min": "3", "step_max": "1"})
    html = page.content.decode()
    assert page.status_code == 400 and 'data-field="step_max"' in html and 'id="no-results"' not in html
    assert "step_max 1 is below step_min 3: no rollout can match" in html


def test_no_match_says_so(signed_in, searched_run):
    page = signed_in.get(f"/runs/{searched_run.pk}/rollouts/search/", {"q": "zebra"})
    assert page.status_code == 200 and 'id="no-results"' in page.content.decode()


def test_a_text_search_says_when_the_index_is_too_far_behind_to_read_every_text(signed_in, searched_run, settings):
    from webapp.explorer import text_search

    settings.TEXT_SEARCH_UNINDEXED_MAX = 10
    html = signed_in.get(f"/runs/{searched_run.pk}/rollouts/search/", {"q": "multiply"}).content.decode()
    assert 'id="text-index-behind"' in html and "14 of its newest rollouts were not searched" in html
    text_search.catch_up_fully(searched_run.pk)
    html = signed_in.get(f"/runs/{searched_run.pk}/rollouts/search/", {"q": "multiply"}).content.decode()
    assert 'id="text-index-behind"' not in html


def test_it_says_how_many_rollouts_match_or_more_than_the_cap(signed_in, searched_run, monkeypatch):
    from webapp.explorer import search

    html = signed_in.get(f"/runs/{searched_run.pk}/rollouts/search/", {"q": "multiply", "limit": "4"}).content.decode()
    assert re.search(r'<p id="match-count"[^>]*>\s*6 rollouts match', html)
    html = signed_in.get(f"/runs/{searched_run.pk}/rollouts/search/", {"q": "multiply", "step_min": "3"}).content.decode()
    assert re.search(r'<p id="match-count"[^>]*>\s*2 rollouts match', html)
    monkeypatch.setattr(search, "COUNT_MAX", 10)
    html = signed_in.get(f"/runs/{searched_run.pk}/rollouts/search/").content.decode()
    assert re.search(r'<p id="match-count"[^>]*>\s*More than 10 rollouts match', html)


def test_the_text_has_a_column_of_its_own_shown_whole_and_wrapped(signed_in, searched_run):
    html = signed_in.get(f"/runs/{searched_run.pk}/rollouts/search/", {"prompt": "p1", "step_max": "1"}).content.decode()
    assert '<table class="table rollouts search-results"' in html and '<th class="text">Text</th>' in html
    cell = re.search(r'<td class="text">(.*?)</td>', html, re.S).group(1)
    assert "<details" not in cell and '<div class="rollout-text">step 1: carry the one' in cell  # not folded to 80 chars


def test_a_later_page_says_which_rows_of_how_many_it_shows(signed_in, searched_run):
    url = f"/runs/{searched_run.pk}/rollouts/search/"
    first = signed_in.get(url, {"q": "multiply", "limit": "4"}).content.decode()
    assert re.search(r'<p id="match-count"[^>]*>\s*6 rollouts match these filters: rows 1–4 of 6\.', first)
    next_link = re.search(r'id="next-page" href="\?([^"]+)"', first).group(1).replace("&amp;", "&")
    rest = signed_in.get(f"{url}?{next_link}").content.decode()
    assert re.search(r'<p id="match-count"[^>]*>\s*6 rollouts match these filters: rows 5–6 of 6\.', rest)
    alone = signed_in.get(url, {"q": "multiply"}).content.decode()  # one page: no rows to say
    assert re.search(r'<p id="match-count"[^>]*>\s*6 rollouts match these filters\.</p>', alone)


def test_the_label_and_whether_the_answer_is_correct_have_columns_when_the_prompts_are_labelled(signed_in,
                                                                                               searched_run):
    # make_prompt_set's labels: p1 "5", p2 "3"; searchable_events' answers are (step + index) % 3
    html = signed_in.get(f"/runs/{searched_run.pk}/rollouts/search/", {"prompt": "p2", "step_max": "1"}).content.decode()
    assert "<th title=\"the prompt's held-out label: monitoring only, never a reward\">Label</th><th>Correct</th>" in html
    assert html.count("<code>3</code>") == 4 and html.count('<td class="correct">✗</td>') == 4


def test_the_searched_words_are_marked_in_each_text(signed_in, searched_run):
    html = signed_in.get(f"/runs/{searched_run.pk}/rollouts/search/", {"q": "Multiply"}).content.decode()
    cells = re.findall(r'<div class="rollout-text">(.*?)</div>', html, re.S)
    assert len(cells) == 6 and all('<mark class="match">multiply</mark>' in cell for cell in cells)

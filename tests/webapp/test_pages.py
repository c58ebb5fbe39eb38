import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils.html import escape

from tests.factories import event_log, make_prompt_set
from webapp.prompts.models import PromptSet
from webapp.runs.models import Run
from webapp.explorer.text_search import words
from webapp.runs.templatetags.rollout_text import highlight_boxed, number
from webapp.runs.ingestion import ingest_events

pytestmark = pytest.mark.django_db


def test_pages_send_anonymous_visitors_to_sign_in(client):
    response = client.get("/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_an_upload_error_names_the_line_and_saves_nothing(signed_in):
    bad = b'{"prompt": "ok"}\n{"prompt": "ok2"}\n{"prompt": }\n'
    response = signed_in.post("/prompt-sets/", {"name": "bad", "file": SimpleUploadedFile("bad.jsonl", bad)})
    assert response.status_code == 400
    assert "line 3" in response.content.decode()
    assert not PromptSet.objects.exists()


def test_the_prompt_set_page_shows_rows_labels_and_a_preview(signed_in, user):
    prompt_set = make_prompt_set(user)
    page = signed_in.get(f"/prompt-sets/{prompt_set.pk}/").content.decode()
    assert 'id="row-count">2<' in page and 'id="has-labels">yes<' in page and "What is 2 + 3?" in page


def test_the_run_form_offers_every_method_with_paper_defaults(signed_in, user):
    make_prompt_set(user)
    # A fresh form for the default model starts on the small CPU preset (tests/webapp/test_run_form.py);
    # the paper's settings are one preset away.
    page = signed_in.get("/runs/new/?preset=paper").content.decode()
    assert 'name="hp-ttrl-n_votes" data-hp="n_votes" value="64"' in page


def test_the_run_form_shows_a_validation_error(signed_in, user):
    prompt_set = make_prompt_set(user)
    response = signed_in.post(
        "/runs/new/", {"name": "x", "prompt_set": prompt_set.pk, "method": "ttrl", "max_steps": "2", "hp-ttrl-temperature": "-3"}
    )
    assert response.status_code == 400 and "temperature" in response.content.decode()
    assert not Run.objects.exists()


def test_the_rollout_page_escapes_model_output_and_highlights_boxed(signed_in, user):
    prompt_set = make_prompt_set(user)
    run = Run.objects.create(name="r", method="ttrl", prompt_set=prompt_set, max_steps=1, created_by=user)
    events = event_log(steps=1)
    events[1]["rollouts"][0]["text"] = "<script>alert(1)</script> so \\boxed{<b>6</b>}"
    ingest_events(run, events)
    page = signed_in.get(f"/runs/{run.pk}/rollouts/?step=1").content.decode()
    assert "<script>alert(1)</script>" not in page
    assert '&lt;script&gt;alert(1)&lt;/script&gt; so <mark class="boxed">\\boxed{&lt;b&gt;6&lt;/b&gt;}</mark>' in page


def test_the_run_page_embeds_the_stored_metrics(signed_in, user):
    prompt_set = make_prompt_set(user)
    run = Run.objects.create(name="r", method="ttrl", prompt_set=prompt_set, max_steps=2, created_by=user)
    ingest_events(run, event_log(steps=2))
    page = signed_in.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="run-initial"' in page and "response_length/mean" in page


@pytest.mark.parametrize(
    "text, expected",
    [
        ("no answer", "no answer"),
        ("\\boxed{\\frac{1}{2}}", '<mark class="boxed">\\boxed{\\frac{1}{2}}</mark>'),
        ("a \\boxed {3} b \\fbox{4}", 'a <mark class="boxed">\\boxed {3}</mark> b <mark class="boxed">\\fbox{4}</mark>'),
        ("\\boxed{unclosed", "\\boxed{unclosed"),
        ("x < y \\boxed{&}", 'x &lt; y <mark class="boxed">\\boxed{&amp;}</mark>'),
    ],
)
def test_highlight_boxed_marks_balanced_boxes_after_escaping(text, expected):
    assert highlight_boxed(text) == expected


def test_the_rollout_page_draws_a_heatmap_when_the_group_has_a_similarity_matrix(signed_in, user):
    prompt_set = make_prompt_set(user)
    run = Run.objects.create(name="r", method="evol_rl", prompt_set=prompt_set, max_steps=1, created_by=user)
    events = event_log(steps=1, group_size=2)
    events[1]["similarity"] = [[1.0, 0.25], [0.25, 1.0]]
    ingest_events(run, events)
    page = signed_in.get(f"/runs/{run.pk}/rollouts/?step=1").content.decode()
    assert 'id="heatmap-1"' in page and '<script id="heatmap-1-data" type="application/json">[[1.0, 0.25], [0.25, 1.0]]</script>' in page
    assert 'id="heatmap-2"' not in page  # the second group has no matrix


def test_the_run_page_charts_the_methods_own_signals(signed_in, user):
    prompt_set = make_prompt_set(user)
    evol = Run.objects.create(name="e", method="evol_rl", prompt_set=prompt_set, max_steps=1, created_by=user)
    rzero = Run.objects.create(name="z", method="r_zero", prompt_set=prompt_set, max_steps=1, created_by=user)
    evol_page = signed_in.get(f"/runs/{evol.pk}/").content.decode()
    assert '"evol_rl/novelty_mean"' in evol_page and '"label_accuracy"' in evol_page
    rzero_page = signed_in.get(f"/runs/{rzero.pk}/").content.decode()
    assert '"rzero/uncertainty_mean"' in rzero_page and '"label_accuracy"' not in rzero_page.split('"chart_metrics"')[1].split("]")[0]
    charted = evol_page.split('"chart_metrics"')[1].split("]")[0]
    assert '"reward_accuracy"' in charted  # TTRL §4, beside label_accuracy: EVOL-RL's reward credits the vote
    em = Run.objects.create(name="m", method="em_token", prompt_set=prompt_set, max_steps=1, created_by=user)
    em_page = signed_in.get(f"/runs/{em.pk}/").content.decode()
    assert '"reward_accuracy"' not in em_page.split('"chart_metrics"')[1].split("]")[0]  # no vote to agree with


@pytest.mark.parametrize("value, shown", [(103.0, "103"), (103, "103"), (0.87512, "0.8751"), (-0.5, "-0.5"),
                                          (1e-5, "1e-05"), (None, "—"), (True, True), ("x", "x")])
def test_numbers_show_as_a_reader_wants_them(value, shown):
    assert number(value) == shown


def test_the_rollout_page_marks_correct_answers_and_shows_extras_as_numbers(signed_in, user):
    run = Run.objects.create(name="r", method="evol_rl", prompt_set=make_prompt_set(user), max_steps=3, created_by=user)
    events = event_log(steps=3, prompts=("p1",), group_size=2)  # answers 6 and 5; p1's label is 5
    for e in events:
        if e["type"] == "group":
            e["rollouts"][0]["extra"] = {"novelty": 0.123456, "rank": 103.0}
    ingest_events(run, events)
    page = signed_in.get(f"/runs/{run.pk}/rollouts/?step=2").content.decode()
    assert '<th data-sort="correct">Correct</th>' in page
    assert page.count('<td class="correct">✗</td>') == 1 and page.count('<td class="correct">✓</td>') == 1
    # mean_similarity too: ingestion gives EVOL-RL's rollouts each of its search extras, null where missing
    assert ('<th data-sort="extra-1">mean_similarity</th><th data-sort="extra-2">novelty</th>'
            '<th data-sort="extra-3">rank</th>') in page
    assert ">0.1235</td>" in page and ">103</td>" in page and "103.000" not in page
    assert 'id="prev-step" href="?step=1"' in page and 'id="next-step" href="?step=3"' in page
    assert 'min="1" max="3"' in page and '<select name="step"' not in page  # a slider, not a select of every step


def test_the_rollout_page_of_a_step_that_is_not_a_number_shows_the_latest(signed_in, user):
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=2, created_by=user)
    ingest_events(run, event_log(steps=2))
    response = signed_in.get(f"/runs/{run.pk}/rollouts/?step=²")
    assert response.status_code == 200 and 'value="2"' in response.content.decode()


def test_the_rollout_page_shows_r_zeros_challenger_prompt_and_the_solvers_generated_question(signed_in, user):
    from rl.arithmetic import CHALLENGER_PROMPT

    run = Run.objects.create(name="z", method="r_zero", prompt_set=make_prompt_set(user), max_steps=2, created_by=user)
    question = {"id": "it1-q0", "question": "What is <7> + 5?", "text": "<question>What is <7> + 5?</question>",
                "p_hat": 0.5, "pseudo_label": "12", "answers": ["12", "11"], "kept": True}
    rollout = {"index": 0, "text": "<question>What is <7> + 5?</question> \\boxed{12}", "answer": "What is <7> + 5?",
               "extra": {"p_hat": 0.5, "uncertainty": 1.0}}
    ingest_events(run, [
        {"seq": 0, "time": 1.0, "type": "group", "step": 1, "prompt_id": "challenger-0", "majority_answer": None,
         "rollouts": [rollout]},
        {"seq": 1, "time": 2.0, "type": "questions", "iteration": 1, "offset": 0, "total": 1, "questions": [question]},
        {"seq": 2, "time": 3.0, "type": "group", "step": 2, "prompt_id": "it1-q0", "majority_answer": "12",
         "rollouts": [{"index": 0, "text": "7 + 5 = \\boxed{12}", "answer": "12"}]},
    ])
    challenger = signed_in.get(f"/runs/{run.pk}/rollouts/?step=1").content.decode()
    assert "Challenger prompt:" in challenger and escape(CHALLENGER_PROMPT) in challenger
    assert "103.000" not in challenger and '<td class="extra" data-sort-value="1.0">1</td>' in challenger
    solver = signed_in.get(f"/runs/{run.pk}/rollouts/?step=2").content.decode()
    assert "Generated question:" in solver and "What is &lt;7&gt; + 5?" in solver and "<7>" not in solver


@pytest.mark.parametrize(
    "text, query, expected",
    [
        ("Carry the one", "carry", '<mark class="match">Carry</mark> the one'),
        ("carrying is not carry", "CARRY", 'carrying is not <mark class="match">carry</mark>'),  # whole words
        ("so \\boxed{12} twelve", "12", 'so <mark class="boxed">\\boxed{<mark class="match">12</mark>}</mark> twelve'),
        ("a <b>b</b> &lt;", "b lt", 'a &lt;<mark class="match">b</mark>&gt;<mark class="match">b</mark>&lt;/'
                                    '<mark class="match">b</mark>&gt; &amp;<mark class="match">lt</mark>;'),
        ("<script>x</script>", "<script>", '&lt;<mark class="match">script</mark>&gt;x&lt;/'
                                           '<mark class="match">script</mark>&gt;'),
        ("nothing to mark", "___", "nothing to mark"),
    ],
)
def test_highlight_boxed_marks_a_searchs_words_in_the_escaped_text(text, query, expected):
    assert highlight_boxed(text, words(query)) == expected

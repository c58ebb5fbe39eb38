"""The launch form (`/runs/new/`): presets, sections, errors that keep every typed value,
clone pre-filling, the eval-set select, roles and per-run alert-rule overrides. The
browser side (preset buttons, method switching) is driven in tests/e2e/test_run_list_browser.py."""
import json
import re

import pytest

from rl.methods import METHODS, validate_hyperparameters
from tests.factories import make_prompt_set, make_team
from webapp.alerts.models import TeamAlertRules
from webapp.alerts.rule_specs import RULE_KINDS, RULES, defaults
from webapp.runs import presets
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

UNLABELLED = [("u1", "Say something.", None), ("u2", "Say more.", None)]


@pytest.fixture
def lab(django_user_model):
    """`lab`: alice admin, mel member, vic viewer; `annex`: alice member; `closed`: vic only
    (viewer), `secret`: eve's alone."""
    lab = make_team("lab", alice="admin", mel="member", vic="viewer")
    annex = make_team("annex", alice="member")
    closed = make_team("closed", vic="viewer", eve="admin")
    secret = make_team("secret", eve="admin")
    users = {u.username: u for u in django_user_model.objects.all()}
    sets = {
        "arith": make_prompt_set(users["alice"], name="arith", team=lab),
        "chat": make_prompt_set(users["alice"], name="chat", team=lab, rows=UNLABELLED),
        "labelled-2": make_prompt_set(users["alice"], name="labelled-2", team=lab),
        "annex-set": make_prompt_set(users["alice"], name="annex-set", team=annex),
        "closed-set": make_prompt_set(users["eve"], name="closed-set", team=closed),
        "secret-set": make_prompt_set(users["eve"], name="secret-set", team=secret),
    }
    return {"teams": {"lab": lab, "annex": annex, "closed": closed, "secret": secret}, "users": users, "sets": sets}


def signed_in(client, lab, name="alice"):
    client.force_login(lab["users"][name])
    return client


def alert_fields(thresholds=None) -> dict:
    """The alert table as the browser submits it: every rule's values, ticked boxes only."""
    thresholds = thresholds or defaults()
    data = {"alert_rules_shown": "1"}
    for kind in RULE_KINDS:
        for param in RULES[kind].params:
            value = thresholds[kind][param.name]
            key = f"alert-{kind}-{param.name}"
            if param.type == "bool":
                if value:
                    data[key] = "on"
            else:
                data[key] = str(value)
    return data


def form_data(lab, method="ttrl", on="arith", preset=presets.SMALL_CPU, **fields) -> dict:
    """What the browser posts for a form filled from a preset on the prompt set `on`:
    every field of the method; `fields` replace posted values."""
    values = presets.preset_values(method, preset)
    data = {"name": "from the form", "team": str(lab["sets"][on].team_id), "prompt_set": str(lab["sets"][on].pk),
            "method": method, "model": "default", "max_steps": "3", "seed": "0", "gpus": "", "eval_prompt_set": "",
            "tags": "", "preset": preset, "cloned_from": ""}
    for name, value in values["hyperparameters"].items():
        key = f"hp-{method}-{name}"
        if isinstance(value, bool):
            if value:
                data[key] = "on"
        else:
            data[key] = "" if value is None else str(value)
    data.update(alert_fields())
    data.update(fields)
    return data


def the_form(page: str) -> str:
    """The launch form alone (the header's team switcher is a select named team too)."""
    return page[page.index('<form method="post" id="run-form"'):]


def field_html(page: str, name: str) -> str:
    page = the_form(page)
    match = re.search(rf'<(?:input|select)[^>]*name="{re.escape(name)}"[^>]*>', page)
    assert match, f"no input {name}"
    return match.group(0)


def select_html(page: str, name: str) -> str:
    page = the_form(page)
    match = re.search(rf'<select[^>]*name="{re.escape(name)}".*?</select>', page, re.S)
    assert match, f"no select {name}"
    return match.group(0)


def config_of(page: str) -> dict:
    return json.loads(re.search(r'<script id="run-form-config" type="application/json">(.*?)</script>', page, re.S).group(1))


# --- presets ---


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("preset", list(presets.TITLES))
def test_every_preset_validates_for_every_method(method, preset):
    values = presets.preset_values(method, preset)
    assert validate_hyperparameters(method, values["hyperparameters"]) == values["hyperparameters"]
    assert set(values["hyperparameters"]) == {h.name for h in METHODS[method].hyperparameters}


def test_the_paper_preset_is_the_methods_defaults_and_the_small_one_is_small():
    for name, spec in METHODS.items():
        assert presets.preset_values(name, presets.PAPER)["hyperparameters"] == spec.defaults()
        small = presets.preset_values(name, presets.SMALL_CPU)
        hp = small["hyperparameters"]
        assert hp["n_votes"] <= 8 and hp["n_train"] <= hp["n_votes"] and hp["max_completion_length"] <= 96
        assert hp["prompts_per_step"] <= 4 and hp["save_every"] == 0 and hp["eval_samples"] <= 4
        assert small["max_steps"] == 20
    rzero = presets.preset_values("r_zero", presets.SMALL_CPU)["hyperparameters"]
    assert rzero["iterations"] * (rzero["challenger_steps"] + rzero["solver_steps"]) <= 20
    assert rzero["keep_low"] <= rzero["keep_high"] <= rzero["solver_samples"]


def test_a_fresh_form_for_the_default_model_starts_on_the_small_cpu_preset(client, lab):
    page = signed_in(client, lab).get("/runs/new/").content.decode()
    assert 'value="8"' in field_html(page, "hp-ttrl-n_votes")
    assert 'value="96"' in field_html(page, "hp-evol_rl-max_completion_length")
    assert 'value="20"' in field_html(page, "max_steps")
    assert re.search(r'data-preset="small_cpu"[^>]*aria-pressed="true"', page)
    assert config_of(page)["presets"]["ttrl"]["paper"]["hyperparameters"]["n_votes"] == 64
    paper = client.get("/runs/new/?preset=paper").content.decode()
    assert 'value="64"' in field_html(paper, "hp-ttrl-n_votes")
    assert re.search(r'data-preset="paper"[^>]*aria-pressed="true"', paper)


def test_the_form_describes_the_method_and_groups_its_parameters_in_sections(client, lab):
    page = signed_in(client, lab).get("/runs/new/").content.decode()
    for method in METHODS.values():
        assert method.description.replace("'", "&#x27;").replace('"', "&quot;") in page
    for section in ("sampling", "optimisation", "method", "evaluation", "alerts"):
        assert f'id="section-{section}"' in page

    def section(key):
        return re.search(rf'id="section-{key}">(.*?)</fieldset>\s*(?:<fieldset class="section"|<button)', page, re.S).group(1)

    assert 'name="hp-ttrl-n_votes"' in section("sampling") and 'name="hp-ttrl-learning_rate"' in section("optimisation")
    assert 'name="hp-evol_rl-alpha"' in section("method") and 'name="hp-ttrl-eval_every"' in section("evaluation")
    assert 'name="eval_prompt_set"' in section("evaluation")
    assert 'name="alert-entropy_collapse-fraction"' in page and 'name="alert-stalled-enabled"' in page


# --- errors keep every value ---


def test_an_error_keeps_every_typed_value_and_marks_the_field(client, lab):
    data = form_data(lab, method="evol_rl", name="my <b>run</b>", seed="7", gpus="0", tags="baseline, aime",
                     eval_prompt_set=str(lab["sets"]["labelled-2"].pk), model="default", max_steps="13")
    data.update({"hp-evol_rl-n_votes": "6", "hp-evol_rl-n_train": "9", "hp-evol_rl-alpha": "0.25",
                 "hp-evol_rl-temperature": "0.7", "hp-evol_rl-learning_rate": "2e-06", "hp-evol_rl-eval_every": "3",
                 "hp-evol_rl-generation_backend": "hf", "alert-entropy_collapse-fraction": "0.33"})
    del data["hp-evol_rl-use_novelty"]  # unticked
    del data["alert-stalled-enabled"]  # rule disabled
    response = signed_in(client, lab).post("/runs/new/", data)
    assert response.status_code == 400
    assert not Run.objects.exists()
    page = response.content.decode()
    # The summary at the top names the field.
    summary = re.search(r'<div class="error-summary" role="alert".*?</div>', page, re.S).group(0)
    assert "n_train" in summary and 'href="#field-hp-evol_rl-n_train"' in summary
    # The field at fault: aria-invalid, a class and the message next to it.
    assert 'aria-invalid="true"' in field_html(page, "hp-evol_rl-n_train")
    assert re.search(r'<label class="hp invalid"[^>]*id="field-hp-evol_rl-n_train"', page)
    assert re.search(r'id="error-hp-evol_rl-n_train">n_train=9 is invalid', page)
    assert page.count('aria-invalid="true"') == 1
    # Every value as typed.
    assert 'value="my &lt;b&gt;run&lt;/b&gt;"' in field_html(page, "name")
    for name, value in (("seed", "7"), ("gpus", "0"), ("tags", "baseline, aime"), ("max_steps", "13"),
                        ("hp-evol_rl-n_votes", "6"), ("hp-evol_rl-n_train", "9"), ("hp-evol_rl-alpha", "0.25"),
                        ("hp-evol_rl-temperature", "0.7"), ("hp-evol_rl-learning_rate", "2e-06"),
                        ("hp-evol_rl-eval_every", "3"), ("alert-entropy_collapse-fraction", "0.33")):
        assert f'value="{value}"' in field_html(page, name), name
    assert "checked" not in field_html(page, "hp-evol_rl-use_novelty")
    assert "checked" in field_html(page, "hp-evol_rl-use_entropy_bonus")
    assert "checked" not in field_html(page, "alert-stalled-enabled")
    assert "checked" in field_html(page, "alert-entropy_collapse-enabled")
    assert re.search(r'<option value="evol_rl" selected', select_html(page, "method"))
    assert re.search(rf'<option value="{lab["sets"]["labelled-2"].pk}" selected', select_html(page, "eval_prompt_set"))
    assert re.search(rf'<option value="{lab["sets"]["arith"].pk}" selected', select_html(page, "prompt_set"))
    # Only the selected method's fieldsets are enabled.
    assert re.search(r'<fieldset class="hyperparameters plain" data-method="evol_rl" >', page)
    assert re.search(r'<fieldset class="hyperparameters plain" data-method="ttrl" hidden disabled>', page)


@pytest.mark.parametrize("change, field, key", [
    ({"max_steps": "0"}, "max_steps", "max_steps"),
    ({"name": "  "}, "name", "name"),
    ({"gpus": "-1"}, "gpus", "gpus"),
    ({"hp-ttrl-temperature": "9"}, "temperature", "hp-ttrl-temperature"),
    ({"alert-entropy_collapse-fraction": "2"}, "alert_rules.entropy_collapse.fraction", "alert-entropy_collapse-fraction"),
    ({"prompt_set": ""}, "prompt_set", "prompt_set"),
])
def test_the_field_named_by_the_error_is_marked(client, lab, change, field, key):
    response = signed_in(client, lab).post("/runs/new/", form_data(lab, **change))
    assert response.status_code == 400
    page = response.content.decode()
    assert f"<strong>{field}</strong>" in page
    assert 'aria-invalid="true"' in field_html(page, key)
    assert page.count('aria-invalid="true"') == 1
    assert f'id="error-{key}"' in page and f'id="field-{key}"' in page


def test_an_eval_set_without_labels_or_a_prompt_set_of_another_team_is_marked(client, lab):
    client = signed_in(client, lab)
    page = client.post("/runs/new/", form_data(lab, eval_prompt_set=str(lab["sets"]["chat"].pk))).content.decode()
    assert 'aria-invalid="true"' in field_html(page, "eval_prompt_set") and "has no labels" in page
    page = client.post("/runs/new/", form_data(lab, team=str(lab["teams"]["annex"].pk))).content.decode()
    assert 'aria-invalid="true"' in field_html(page, "team") and "belongs to team" in page
    assert not Run.objects.exists()


def test_a_valid_form_launches_the_run_with_its_tags_eval_set_and_hyperparameters(client, lab):
    data = form_data(lab, method="evol_rl", tags="baseline, aime", eval_prompt_set=str(lab["sets"]["labelled-2"].pk))
    del data["hp-evol_rl-use_novelty"]
    response = signed_in(client, lab).post("/runs/new/", data)
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert run.tags == ["baseline", "aime"] and run.eval_prompt_set == lab["sets"]["labelled-2"]
    assert run.hyperparameters["use_novelty"] is False and run.hyperparameters["n_votes"] == 8
    assert run.max_steps == 3 and run.team == lab["teams"]["lab"] and "alert_rules" not in run.hyperparameters


# --- clone ---


@pytest.fixture
def source(lab):
    hp = validate_hyperparameters("evol_rl", {"n_votes": 12, "n_train": 6, "alpha": 0.3, "use_novelty": False,
                                              "learning_rate": 3e-6, "eval_every": 2})
    hp["alert_rules"] = {"entropy_collapse": {"fraction": 0.4}}
    return Run.objects.create(name="original <i>", method="evol_rl", prompt_set=lab["sets"]["arith"],
                              eval_prompt_set=lab["sets"]["labelled-2"], tags=["a", "b c"], model="default",
                              embedding_model="long-embedder", hyperparameters=hp, max_steps=17, seed=5, gpus=0, created_by=lab["users"]["alice"],
                              state=Run.SUCCEEDED)


def test_clone_opens_the_form_filled_with_every_setting_of_the_source(client, lab, source):
    page = signed_in(client, lab, "mel").get(f"/runs/new/?clone={source.pk}").content.decode()
    assert 'value="original &lt;i&gt; (clone)"' in field_html(page, "name")
    assert re.search(rf'<option value="{source.prompt_set_id}" selected', select_html(page, "prompt_set"))
    assert re.search(rf'<option value="{source.eval_prompt_set_id}" selected', select_html(page, "eval_prompt_set"))
    assert re.search(r'<option value="evol_rl" selected', select_html(page, "method"))
    for name, value in (("max_steps", "17"), ("seed", "5"), ("gpus", "0"), ("tags", "a, b c"), ("model", "default"),
                        ("embedding_model", "long-embedder"),
                        ("hp-evol_rl-n_votes", "12"), ("hp-evol_rl-n_train", "6"), ("hp-evol_rl-alpha", "0.3"),
                        ("hp-evol_rl-learning_rate", "3e-06"), ("hp-evol_rl-eval_every", "2"),
                        ("hp-evol_rl-max_completion_length", "12288"), ("cloned_from", str(source.pk)),
                        ("alert-entropy_collapse-fraction", "0.4")):
        assert f'value="{value}"' in field_html(page, name), name
    assert "checked" not in field_html(page, "hp-evol_rl-use_novelty")
    assert "checked" in field_html(page, "hp-evol_rl-use_clip_high")
    assert not re.search(r'data-preset="[a-z_]+"[^>]*aria-pressed="true"', page)  # the source's values, no preset


def test_the_run_pages_clone_button_opens_the_prefilled_form_and_the_launch_records_the_source(client, lab, source):
    client = signed_in(client, lab, "mel")
    response = client.post(f"/runs/{source.pk}/clone/")
    assert response.status_code == 302 and response["Location"] == f"/runs/new/?clone={source.pk}"
    assert Run.objects.count() == 1  # nothing launched yet
    detail = client.get(f"/runs/{source.pk}/").content.decode()
    assert f'href="/runs/new/?clone={source.pk}"' in detail
    data = form_data(lab, method="evol_rl", name="original (clone)", cloned_from=str(source.pk),
                     embedding_model="long-embedder", **{"alert-entropy_collapse-fraction": "0.4"})
    response = client.post("/runs/new/", data)
    clone = Run.objects.exclude(pk=source.pk).get()
    assert response.status_code == 302 and clone.cloned_from == source and clone.created_by.username == "mel"
    assert clone.embedding_model == "long-embedder"
    assert "long-embedder" in client.get(f"/runs/{clone.pk}/").content.decode()
    assert clone.hyperparameters["alert_rules"] == {"entropy_collapse": {"fraction": 0.4}}


def test_the_api_clone_still_launches_directly(client, lab, source):
    from webapp.accounts.models import ApiToken

    key = ApiToken.issue(lab["users"]["mel"])
    response = client.post(f"/api/runs/{source.pk}/clone", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 201
    clone = Run.objects.get(pk=response.json()["id"])
    assert clone.cloned_from == source and clone.hyperparameters == source.hyperparameters
    assert clone.tags == source.tags and clone.eval_prompt_set == source.eval_prompt_set


def test_a_run_of_another_team_cannot_be_cloned_into_the_form(client, lab):
    hidden = Run.objects.create(name="eves secret", method="ttrl", prompt_set=lab["sets"]["secret-set"], max_steps=4,
                                created_by=lab["users"]["eve"])
    response = signed_in(client, lab).get(f"/runs/new/?clone={hidden.pk}")
    assert response.status_code == 404 and "eves secret" not in response.content.decode()
    assert client.get("/runs/new/?clone=999999").status_code == 404  # answers like a missing run
    data = form_data(lab, cloned_from=str(hidden.pk))
    assert client.post("/runs/new/", data).status_code == 302
    assert Run.objects.exclude(pk=hidden.pk).get().cloned_from is None


# --- teams, prompt sets, eval sets, roles ---


def test_the_eval_set_select_lists_only_the_labelled_sets_of_the_team(client, lab):
    page = signed_in(client, lab).get(f"/runs/new/?prompt_set={lab['sets']['arith'].pk}").content.decode()
    options = dict(re.findall(r'<option value="(\d*)"[^>]*>([^<]*)<', select_html(page, "eval_prompt_set")))
    assert sorted(v.split(" (")[0] for v in options.values()) == ["arith", "labelled-2", "none"]
    prompt_options = select_html(page, "prompt_set")
    assert "chat" in prompt_options and "annex-set" not in prompt_options  # the team's sets only
    # The script gets every launchable set with its team, to follow the team select.
    sets = {s["name"]: s for s in config_of(page)["prompt_sets"]}
    assert set(sets) == {"arith", "chat", "labelled-2", "annex-set"}
    assert sets["chat"]["has_labels"] is False and sets["annex-set"]["team"] == lab["teams"]["annex"].pk
    annex = client.get(f"/runs/new/?prompt_set={lab['sets']['annex-set'].pk}").content.decode()
    assert re.search(rf'<option value="{lab["teams"]["annex"].pk}" selected', select_html(annex, "team"))
    assert "labelled-2" not in select_html(annex, "eval_prompt_set")


def test_the_team_select_offers_only_teams_where_the_user_may_launch(client, lab):
    page = signed_in(client, lab, "vic").get("/runs/new/").content.decode()
    assert re.findall(r'<option value="\d+"[^>]*>([^<]*)<', select_html(page, "team")) == []
    assert 'id="no-launchable-team"' in page and "closed-set" not in page
    page = signed_in(client, lab, "alice").get("/runs/new/").content.decode()
    assert re.findall(r'<option value="\d+"[^>]*>([^<]*)<', select_html(page, "team")) == ["annex", "lab"]


def test_a_viewer_posting_the_form_gets_403(client, lab):
    client = signed_in(client, lab, "vic")
    assert client.post("/runs/new/", form_data(lab)).status_code == 403
    closed = {"team": str(lab["teams"]["closed"].pk), "prompt_set": str(lab["sets"]["closed-set"].pk)}
    assert client.post("/runs/new/", form_data(lab, **closed)).status_code == 403
    assert not Run.objects.exists()


def test_an_outsider_cannot_launch_on_another_teams_prompt_set(client, lab):
    data = form_data(lab, team="")
    data["prompt_set"] = str(lab["sets"]["secret-set"].pk)
    response = signed_in(client, lab).post("/runs/new/", data)
    assert response.status_code == 400 and 'aria-invalid="true"' in field_html(response.content.decode(), "prompt_set")
    assert not Run.objects.exists()


# --- alert-rule overrides ---


def test_only_alert_thresholds_that_differ_from_the_teams_reach_the_run(client, lab):
    TeamAlertRules.objects.create(team=lab["teams"]["lab"], overrides={"majority_lock_in": {"consensus": 0.9}})
    client = signed_in(client, lab)
    page = client.get(f"/runs/new/?prompt_set={lab['sets']['arith'].pk}").content.decode()
    assert 'value="0.9"' in field_html(page, "alert-majority_lock_in-consensus")  # the team's value, not 0.95
    team_values = defaults()
    team_values["majority_lock_in"]["consensus"] = 0.9
    data = form_data(lab)
    data.update(alert_fields(team_values))
    data["alert-entropy_collapse-fraction"] = "0.3"
    data["alert-length_collapse-severity"] = "critical"
    del data["alert-stalled-enabled"]
    assert client.post("/runs/new/", data).status_code == 302
    run = Run.objects.get()
    assert run.hyperparameters["alert_rules"] == {
        "entropy_collapse": {"fraction": 0.3}, "length_collapse": {"severity": "critical"}, "stalled": {"enabled": False},
    }
    from webapp.alerts.engine import thresholds_for

    effective = thresholds_for(run)
    assert effective["majority_lock_in"]["consensus"] == 0.9 and effective["entropy_collapse"]["fraction"] == 0.3
    assert effective["stalled"]["enabled"] is False
    assert "alert_rules" not in run.training_hyperparameters()


def test_a_form_without_the_alert_table_sends_no_overrides(client, lab):
    data = {k: v for k, v in form_data(lab).items() if not k.startswith("alert")}
    assert signed_in(client, lab).post("/runs/new/", data).status_code == 302
    assert "alert_rules" not in Run.objects.get().hyperparameters


def test_a_viewer_opening_a_clone_is_told_they_cannot_launch_in_that_team(client, lab, source):
    page = signed_in(client, lab, "vic").get(f"/runs/new/?clone={source.pk}").content.decode()
    assert 'id="launch-notice"' in page and "role in team &#x27;lab&#x27; is viewer" in page
    assert client.post(f"/runs/{source.pk}/clone/").status_code == 403


def test_the_form_says_where_each_methods_defaults_come_from(client, lab):
    from django.utils.html import escape

    from rl.methods import METHODS

    page = signed_in(client, lab).get("/runs/new/").content.decode()
    assert escape(METHODS["empo"].defaults_source) in page and escape(METHODS["rlpr"].defaults_source) in page

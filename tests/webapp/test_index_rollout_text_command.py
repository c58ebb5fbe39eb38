"""manage.py index_rollout_text: indexes stored runs' rollout texts, safe to run twice."""
import io

import pytest
from django.core.management import CommandError, call_command

from webapp.explorer.models import RolloutText, TextIndexMark
from webapp.runs.models import Rollout

pytestmark = pytest.mark.django_db


def test_it_indexes_every_stored_rollout_once(searched_run):
    out = io.StringIO()
    call_command("index_rollout_text", stdout=out)
    assert f"run {searched_run.pk}: indexed 24 rollout texts" in out.getvalue()
    last = Rollout.objects.filter(run=searched_run).order_by("-id").values_list("id", flat=True).first()
    assert TextIndexMark.objects.get(run=searched_run).through == last
    call_command("index_rollout_text", str(searched_run.pk), stdout=io.StringIO())
    assert RolloutText.objects.filter(run=searched_run).values("rollout").count() == 24


def test_it_names_a_run_that_does_not_exist(searched_run):
    with pytest.raises(CommandError, match="no run with id 999999"):
        call_command("index_rollout_text", "999999", str(searched_run.pk))

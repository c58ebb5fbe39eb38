"""Heatmaps of a run trained elsewhere (webapp/external/similarity.py): each group's G×G cosine similarity of
its rollouts' embeddings (the shipped MiniLM), the step's similarity/mean once all its groups have one, one
worker at a time under the run's lease."""
import json
from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from rl.similarity import Embedder
from webapp.external import similarity
from webapp.external.grouping import group_ready_steps
from webapp.external.models import ExternalRun
from webapp.external.rollouts import parse_lines, receive
from webapp.runs.models import Group, Run
from tests.factories import charts_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def grouped_run(mlflow, no_enqueue):
    run = Run.objects.get(mlflow_run_id=mlflow.new_run())
    texts = {"a": ["The sum is four. \\boxed{4}", "The sum is four. \\boxed{4}", "Adding two and two: \\boxed{4}"],
             "b": ["<think>long musing</think>Five. \\boxed{5}", "Six, I believe. \\boxed{6}"],
             "c": ["alone \\boxed{1}"]}
    rows = [{"step": 1, "prompt": prompt, "completion": text, "index": i}
            for prompt, group in texts.items() for i, text in enumerate(group)]
    receive(run, parse_lines("".join(json.dumps(r) + "\n" for r in rows).encode()))
    group_ready_steps(run.pk, now=timezone.now() + timedelta(minutes=1))
    return run, texts


def test_each_group_of_two_or_more_gets_its_cosine_similarity_matrix(grouped_run):
    run, texts = grouped_run
    assert similarity.embed_groups(run.pk) == 2
    a = Group.objects.get(run=run, size=3)
    assert a.similarity[0][1] == 1.0 and a.similarity[0][0] == 1.0 and a.similarity[1][2] < 1.0
    embedder = Embedder()
    # the text after </think> is what is embedded, as for Evolab's own runs (DESIGN §6)
    vectors = embedder.embed(["Five. \\boxed{5}", "Six, I believe. \\boxed{6}"])
    expected = round(float(np.dot(vectors[0], vectors[1])), 3)
    b = Group.objects.get(run=run, size=2)
    assert b.similarity[0][1] == pytest.approx(expected, abs=1e-3) and b.similarity_mean == b.similarity[0][1]
    assert Group.objects.get(run=run, size=1).similarity is None
    mean = charts_of(Run.objects.get(pk=run.pk))["similarity/mean"]["values"]
    assert mean == [pytest.approx((a.similarity_mean + b.similarity_mean) / 2)]
    assert ExternalRun.objects.get(run=run).embedding_lease_until is None


def test_a_run_another_worker_is_embedding_is_left_to_it(grouped_run):
    run, _ = grouped_run
    ExternalRun.objects.filter(run=run).update(embedding_lease_until=timezone.now() + timedelta(seconds=60))
    assert similarity.embed_groups(run.pk) == 0
    assert not Group.objects.filter(run=run, similarity__isnull=False).exists()
    ExternalRun.objects.filter(run=run).update(embedding_lease_until=timezone.now() - timedelta(seconds=1))
    assert similarity.embed_groups(run.pk) == 2  # a dead worker's lease has run out

"""Metric points stored before series existed move into series and narrow points, times included."""
import pytest

from tests.factories import migrate_to, migrated_from, run_in

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("runs", "0005_rzero_question")]
AFTER = [("runs", "0006_metric_series")]


def test_old_points_become_series_whose_later_value_of_a_step_wins_with_its_event_time():
    with migrated_from(BEFORE) as old:
        run = run_in(old)
        Event, Point = old.get_model("runs", "RunEvent"), old.get_model("runs", "MetricPoint")
        for seq, kind, step, time in [(0, "metrics", 1, 10.0), (1, "metrics", 2, 20.0), (2, "eval", 2, 25.0),
                                      (3, "metrics", 2, 30.0)]:  # seq 3: step 2 logged again after a resume
            Event.objects.create(run=run, seq=seq, type=kind, time=time, step=step, payload={})
        for seq, step, name, value in [(0, 1, "entropy", 1.0), (1, 2, "entropy", 0.9), (2, 2, "eval/pass@16", 0.5),
                                       (3, 2, "entropy", 0.7)]:
            Point.objects.create(run=run, seq=seq, step=step, name=name, value=value)

        migrate_to(AFTER)
        from webapp.runs.queries import metric_series_of_runs

        assert metric_series_of_runs([run.pk])[run.pk] == {
            "entropy": {"steps": [1, 2], "values": [1.0, 0.7], "times": [10.0, 30.0]},
            "eval/pass@16": {"steps": [2], "values": [0.5], "times": [25.0]},
        }

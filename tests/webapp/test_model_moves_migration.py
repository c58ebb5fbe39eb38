"""The metric store's and the text index's models moved out of the runs app with their tables (metrics/0001,
explorer/0001): their content types move with them, so a permission granted on one still names it."""
import pytest
from django.contrib.contenttypes.models import ContentType

from tests.factories import migrate_to, migrated_from

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("runs", "0020_transition_previous_state")]  # metrics/0001 and explorer/0001 unapplied with it
AFTER = [("metrics", "0001_initial"), ("explorer", "0001_initial")]


def test_each_moved_models_content_type_is_the_same_row_under_its_new_app():
    # the content types' own app is not migrated back: its model of today reads them
    with migrated_from(BEFORE):
        before = {model: ContentType.objects.get_or_create(app_label="runs", model=model)[0].pk
                  for model in ("metricseries", "metricpoint", "metricchunk", "rollouttext", "textindexmark")}

        migrate_to(AFTER)
        ContentType.objects.clear_cache()
        after = dict(ContentType.objects.filter(pk__in=before.values()).values_list("model", "app_label"))
        assert after == {"metricseries": "metrics", "metricpoint": "metrics", "metricchunk": "metrics",
                         "rollouttext": "explorer", "textindexmark": "explorer"}
        assert ContentType.objects.get(app_label="metrics", model="metricseries").pk == before["metricseries"]

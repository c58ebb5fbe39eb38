"""Migration runs/0010 swaps the reward and advantage order indexes of 0008/0009 for ones ending in
step, so a step range is checked inside the index (webapp/explorer/search_indexes.py)."""
import pytest
from django.db import connection

from tests.factories import migrate_to, migrate_to_latest
from webapp.explorer import search_indexes

pytestmark = pytest.mark.django_db(transaction=True)


def rollout_indexes() -> dict[str, list[str]]:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, search_indexes.TABLE)
    return {name: c["columns"] for name, c in constraints.items() if c["index"]}


def make_the_indexes_0009_made() -> None:
    nulls = " NULLS FIRST" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        for field in search_indexes.NULLABLE_ORDERS:
            cursor.execute(f"DROP INDEX IF EXISTS rollout_order_{field}")
            cursor.execute(f"DROP INDEX IF EXISTS rollout_order_majority_{field}")
            cursor.execute(f"CREATE INDEX rollout_search_{field} ON {search_indexes.TABLE} "
                           f"(run_id, {field}{nulls}, id)")
            cursor.execute(f"CREATE INDEX rollout_search_majority_{field} ON {search_indexes.TABLE} "
                           f"(run_id, in_majority, {field}{nulls}, id)")


def test_the_order_indexes_end_in_step_after_the_migration():
    try:
        migrate_to([("runs", "0009_rollout_text")])
        make_the_indexes_0009_made()

        migrate_to([("runs", "0010_order_indexes_end_in_step")])

        indexes = rollout_indexes()
        for field in search_indexes.NULLABLE_ORDERS:
            assert f"rollout_search_{field}" not in indexes
            assert f"rollout_search_majority_{field}" not in indexes
            assert indexes[f"rollout_order_{field}"] == ["run_id", field, "id", "step"]
            assert indexes[f"rollout_order_majority_{field}"] == ["run_id", "in_majority", field, "id", "step"]
    finally:
        migrate_to_latest()

"""The rollout search's indexes that differ between the databases: the one place that knows them.

Missing values sort lowest (a rollout without a reward comes first ascending, last descending), which
is SQLite's own order, so there a plain (run, reward, id) index serves; PostgreSQL puts NULLs last
ascending, so its index says NULLS FIRST (SQLite cannot declare that). Django's Meta.indexes cannot
differ by database, hence these are made here, by migration runs/0008.

The text index is not here: it lives in a table of its own, filled behind ingestion
(webapp/runs/text_search.py says why).
"""
from .models import Rollout

TABLE = Rollout._meta.db_table
NULLABLE_ORDERS = ("reward", "advantage")  # sortable fields that may be missing


def create(connection) -> None:
    nulls = " NULLS FIRST" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        for field in NULLABLE_ORDERS:
            cursor.execute(f"CREATE INDEX IF NOT EXISTS rollout_search_{field} ON {TABLE} (run_id, {field}{nulls}, id)")


def drop(connection) -> None:
    with connection.cursor() as cursor:
        for field in NULLABLE_ORDERS:
            cursor.execute(f"DROP INDEX IF EXISTS rollout_search_{field}")


# The majority or minority ordered by reward or advantage ("the minority's best rollouts", EVOL-RL's
# question) have an index each: reward and advantage follow the majority so closely that walking the
# plain order index passed every majority rollout first (0.9 s at 1M rollouts).
#
# Method extras the search orders by through an index: EVOL-RL's novelty, the one issue 10 names (each
# index costs every rollout's ingestion a little, every run's, whatever its method). Others are read
# without one: fine over a step range, about a second over a million rollouts.
INDEXED_EXTRAS = ("novelty",)


def create_extra_indexes(connection) -> None:
    """The majority/minority orders (below), and on PostgreSQL only the extras' (the expression must be
    the one the search's order compiles to, Cast(KeyTextTransform(key, "extra"), FloatField()); SQLite's
    planner cannot match it, and the demo's runs are small)."""
    postgres = connection.vendor == "postgresql"
    nulls = " NULLS FIRST" if postgres else ""
    with connection.cursor() as cursor:
        for field in NULLABLE_ORDERS:
            cursor.execute(f"CREATE INDEX IF NOT EXISTS rollout_search_majority_{field} ON {TABLE} "
                           f"(run_id, in_majority, {field}{nulls}, id)")
        for key in INDEXED_EXTRAS if postgres else ():
            cursor.execute(f"CREATE INDEX IF NOT EXISTS rollout_search_extra_{key} ON {TABLE} "
                           f"(run_id, ((extra ->> '{key}')::double precision) NULLS FIRST, id)")


def drop_extra_indexes(connection) -> None:
    with connection.cursor() as cursor:
        for field in NULLABLE_ORDERS:
            cursor.execute(f"DROP INDEX IF EXISTS rollout_search_majority_{field}")
        for key in INDEXED_EXTRAS:
            cursor.execute(f"DROP INDEX IF EXISTS rollout_search_extra_{key}")

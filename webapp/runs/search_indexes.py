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

# The reward and advantage orders end in step, after id: it orders nothing, but a step range becomes
# a condition checked inside the index. Rewards and advantages tie by the thousand (TTRL's 0/1, every
# minority rollout at the same advantage), a tie is walked by id from the run's end, and before this
# each rollout outside the range cost a table read (the minority over half a 1M-rollout run by
# -advantage passed 160,000 of them: 0.3-0.4 s; PostgreSQL 15 cannot skip inside an index).
# Migration runs/0010 replaced the indexes of 0008/0009 (named rollout_search_*) with these.
STEP_LAST = ", id, step"


def create(connection) -> None:
    nulls = " NULLS FIRST" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        for field in NULLABLE_ORDERS:
            cursor.execute(f"CREATE INDEX IF NOT EXISTS rollout_order_{field} ON {TABLE} "
                           f"(run_id, {field}{nulls}{STEP_LAST})")


def drop(connection) -> None:
    with connection.cursor() as cursor:
        for field in NULLABLE_ORDERS:
            cursor.execute(f"DROP INDEX IF EXISTS rollout_order_{field}")


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
            cursor.execute(f"CREATE INDEX IF NOT EXISTS rollout_order_majority_{field} ON {TABLE} "
                           f"(run_id, in_majority, {field}{nulls}{STEP_LAST})")
        for key in INDEXED_EXTRAS if postgres else ():
            cursor.execute(f"CREATE INDEX IF NOT EXISTS rollout_search_extra_{key} ON {TABLE} "
                           f"(run_id, ((extra ->> '{key}')::double precision) NULLS FIRST, id)")


def drop_extra_indexes(connection) -> None:
    with connection.cursor() as cursor:
        for field in NULLABLE_ORDERS:
            cursor.execute(f"DROP INDEX IF EXISTS rollout_order_majority_{field}")
        for key in INDEXED_EXTRAS:
            cursor.execute(f"DROP INDEX IF EXISTS rollout_search_extra_{key}")


def drop_indexes_without_step(connection) -> None:
    """Migration runs/0010: the reward and advantage indexes as 0008 and 0009 made them, before STEP_LAST."""
    with connection.cursor() as cursor:
        for field in NULLABLE_ORDERS:
            cursor.execute(f"DROP INDEX IF EXISTS rollout_search_{field}")
            cursor.execute(f"DROP INDEX IF EXISTS rollout_search_majority_{field}")

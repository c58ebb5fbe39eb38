"""The rollout search's indexes that differ between the databases: the one place that knows them.

Missing values sort lowest (a rollout without a reward comes first ascending, last descending), which
is SQLite's own order, so there a plain (run, reward, id) index serves; PostgreSQL puts NULLs last
ascending, so its index says NULLS FIRST (SQLite cannot declare that). Django's Meta.indexes cannot
differ by database, hence these are made here, by migration runs/0008.

The text index is not here: it lives in a table of its own, filled behind ingestion
(webapp/explorer/text_search.py says why).
"""
from rl.methods import METHODS

from webapp.runs.models import Rollout, Run

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
def create_extra_indexes(connection) -> None:
    """The majority/minority orders (migration runs/0008)."""
    nulls = " NULLS FIRST" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        for field in NULLABLE_ORDERS:
            cursor.execute(f"CREATE INDEX IF NOT EXISTS rollout_order_majority_{field} ON {TABLE} "
                           f"(run_id, in_majority, {field}{nulls}{STEP_LAST})")


def drop_extra_indexes(connection) -> None:
    with connection.cursor() as cursor:
        for field in NULLABLE_ORDERS:
            cursor.execute(f"DROP INDEX IF EXISTS rollout_order_majority_{field}")


# The methods' search extras (Method.search_extras: EVOL-RL's novelty, COMPASS's confidence, ...), one
# index each, partial: it holds only the rollouts that have the key, so a rollout pays at ingestion for its own
# method's few and not for every method's. Ingestion gives every rollout of a method all of its search extras
# (null where the scorer has none), so a run's rollouts are all in the index of each of its method's search
# extras, and the search adds the index's condition (has_extra) to find them there. On PostgreSQL the
# expression reads the jsonb column; on SQLite (the demo's database) it is the same CASE over json_type and
# json_extract, written with the key inline (SQLite matches an indexed expression, and a partial index's
# condition, only where the query writes it the same, bound parameters excluded).
SEARCH_EXTRAS = tuple(sorted({key for method in METHODS.values() for key in method.search_extras}))


def has_extra_indexes(connection) -> bool:
    return connection.vendor in ("postgresql", "sqlite")


def numeric_extra(column: str, key: str, vendor: str = "postgresql") -> str:
    """The database's expression for the extra `key` as a float where it is a JSON number, else null: the
    search extras' indexes and the search's order by any extra are this one expression, so the planner
    matches them. A plain cast fails on true or "high", and in an index it failed the whole ingestion
    (any method's rollout may carry the key). `key` is a plain name (search.EXTRA_KEY_CHARS)."""
    if vendor == "sqlite":
        path = f"'$.\"{key}\"'"
        return f"(CASE WHEN json_type({column}, {path}) IN ('integer', 'real') THEN json_extract({column}, {path}) END)"
    return (f"(CASE WHEN jsonb_typeof({column} -> '{key}') = 'number' "
            f"THEN ({column} ->> '{key}')::double precision END)")


def has_extra(column: str, key: str, vendor: str = "postgresql") -> str:
    """The condition of the extra `key`'s partial index: the rollout carries the key (null or not)."""
    if vendor == "sqlite":
        return f"json_type({column}, '$.\"{key}\"') IS NOT NULL"
    return f"{column} ? '{key}'"


def create_search_extra_indexes(connection) -> None:
    """Each search extra's index where missing, after giving the rollouts stored before their method declared
    it the key. A method that declares a new search extra needs a migration that calls this
    (tests/webapp/test_search_extra_indexes.py checks that each has its index)."""
    if not has_extra_indexes(connection):
        return
    give_rollouts_their_search_extras(connection)
    vendor = connection.vendor
    nulls = " NULLS FIRST" if vendor == "postgresql" else ""  # SQLite's own order: nulls lowest
    with connection.cursor() as cursor:
        for key in SEARCH_EXTRAS:
            cursor.execute(f"CREATE INDEX IF NOT EXISTS {extra_index_name(key)} ON {TABLE} "
                           f"(run_id, {numeric_extra('extra', key, vendor)}{nulls}, id) "
                           f"WHERE {has_extra('extra', key, vendor)}")


def give_rollouts_their_search_extras(connection) -> None:
    """Every stored rollout of each method gets the method's search extras it lacks, as null (as ingestion
    stores them now)."""
    run_table = Run._meta.db_table
    with connection.cursor() as cursor:
        for method in METHODS.values():
            for key in method.search_extras:
                if connection.vendor == "sqlite":
                    cursor.execute(f"UPDATE {TABLE} SET extra = json_set(extra, '$.\"{key}\"', NULL) "
                                   f"WHERE run_id IN (SELECT id FROM {run_table} WHERE method = %s) "
                                   f"AND NOT ({has_extra('extra', key, 'sqlite')})", [method.name])
                    continue
                cursor.execute(f"UPDATE {TABLE} SET extra = extra || jsonb_build_object(%s::text, null) "
                               f"WHERE run_id IN (SELECT id FROM {run_table} WHERE method = %s) AND NOT extra ? %s",
                               [key, method.name, key])


def extra_index_name(key: str) -> str:
    return f"rollout_extra_{key}"[:63]  # PostgreSQL's longest name


def drop_indexes_without_step(connection) -> None:
    """Migration runs/0010: the reward and advantage indexes as 0008 and 0009 made them, before STEP_LAST."""
    with connection.cursor() as cursor:
        for field in NULLABLE_ORDERS:
            cursor.execute(f"DROP INDEX IF EXISTS rollout_search_{field}")
            cursor.execute(f"DROP INDEX IF EXISTS rollout_search_majority_{field}")

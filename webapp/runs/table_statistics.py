"""The planner's statistics of the tables ingestion bulk-loads (PostgreSQL).

PostgreSQL's autovacuum ANALYZEs a table once 50 rows + 10% of it have changed since its last
analysis. Where autovacuum is off (this project's CI server) or behind, a table loaded from empty
has no statistics and the planner guesses from its size: reading one step's 512 rollouts of a
run with a million, it expected 266,000 rows and chose a parallel scan with JIT compilation,
49 ms instead of 1 ms. So ingestion analyses a table itself when it has crossed autovacuum's own
threshold, which it checks at most every CHECK_SECONDS per process: one catalog query, and an
ANALYZE (a sample of the table, without blocking writers) each time a table grew by a tenth.
"""
import logging
import time

from django.db import DatabaseError, connection, transaction

from webapp import bulk
from webapp.metrics import series
from webapp.runs.models import Group, Rollout, RunEvent

log = logging.getLogger(__name__)

TABLES = [*(model._meta.db_table for model in (Rollout, Group, RunEvent)), *series.TABLES]
CHECK_SECONDS = 30.0
LOCK_TIMEOUT = "200ms"
_last_check = float("-inf")


def watch(*tables: str) -> None:
    """Check these tables too: bulk-loaded by an app built on this one (the explorer's text index)."""
    TABLES.extend(name for name in tables if name not in TABLES)


def keep_statistics(force: bool = False) -> list[str]:
    """ANALYZE the ingested tables whose changes since their last analysis passed autovacuum's
    threshold; returns their names. A no-op on SQLite, and between checks unless `force`."""
    global _last_check
    now = time.monotonic()
    if connection.vendor != "postgresql" or (not force and now - _last_check < CHECK_SECONDS):
        return []
    _last_check = now
    stale = [name for name, changed, rows in bulk.fetch(
        "SELECT s.relname, s.n_mod_since_analyze, c.reltuples FROM pg_stat_user_tables s "
        f"JOIN pg_class c ON c.oid = s.relid WHERE s.relname IN ({bulk.placeholders(TABLES)})", TABLES)
        if changed > 50 + 0.1 * max(rows, 0)]  # reltuples is -1 for a table never analysed
    analysed = []
    for name in stale:
        # Upkeep must never hold up real work: a table someone has locked (a TRUNCATE, a migration) is
        # skipped, and a lock not granted within LOCK_TIMEOUT gives up (the next check tries again),
        # one table per transaction so no two of its locks are ever held at once.
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
                cursor.execute(f"ANALYZE (SKIP_LOCKED) {bulk.quoted(name)}")
            analysed.append(name)
        except DatabaseError as exc:
            log.info("left %s for later: %s", name, exc)
    if analysed:
        log.info("analysed %s for the query planner", ", ".join(analysed))
    return analysed

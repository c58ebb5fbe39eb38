"""Free-text search in rollout texts (DESIGN §4.6 `q`, issue 10), indexed behind ingestion.

Why behind: measured here, a GIN index on the rollout table itself cut ingestion from about 13,000 to
3,000 rollouts/s. So the words of each text go to a table of their own (RolloutText: PostgreSQL's
tsvector under a GIN index, SQLite's FTS5), which `catch_up` fills after ingestion has committed (the
supervisor calls it on each poll, a bounded batch at a time; `manage.py index_rollout_text` does the
same for runs stored before the index existed). TextIndexMark keeps, per run, the last rollout id
indexed; a search reads the index up to the mark and reads the texts of the rollouts after it, so a
result never depends on whether the indexer has caught up, only its speed does.

A query matches a rollout when every word of the query is a word of its text, whatever the case and
in any order, a word being a run of letters and digits (SQLite's unicode61 tokenizer's rule; on
PostgreSQL the same split by regular expression, not its text-search parser, which drops anything
that looks like an HTML tag and reads "+3.14" or "e-mail" as words of their own). No stemming.
"""
import functools
import re

from django.conf import settings
from django.db import connection, transaction
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL

from webapp import bulk
from webapp.explorer.models import RolloutText, TextIndexMark
from webapp.runs.models import Rollout

TABLE, ROLLOUTS, MARKS = RolloutText._meta.db_table, Rollout._meta.db_table, TextIndexMark._meta.db_table
# a query is common when at least this many rollouts per result asked for hold its words (100: one
# rollout in a hundred, so a page of 50 is full after about 5,000 checks)
COMMON_PER_ROW = 100
BATCH = 2000  # rollouts indexed per transaction: four steps at the papers' 8 x 64, under 1 s of work here
UNREAD_COUNT_CAP = 100_000  # rollouts not searched are counted up to this many
WORD = re.compile(r"[^\W_]+")  # a word as SQLite's unicode61 tokenizer cuts them


# PostgreSQL's tsvector takes words of at most 2,047 bytes: longer ones (degenerate output writes thousands of
# letters in a row) are indexed and searched by their first MAX_WORD_CHARS characters (4 bytes each at most).
# One such word failed the run's indexing on every retry and every text search of the run. SQLite's FTS5 has
# no such limit and keeps words whole.
MAX_WORD_CHARS = 500


def document_of(column: str) -> str:
    """PostgreSQL: the words of a text column as a tsvector, cut by WORD's rule, each cut to MAX_WORD_CHARS."""
    return (f"array_to_tsvector(ARRAY(SELECT left(w, {MAX_WORD_CHARS}) FROM "
            f"unnest(regexp_split_to_array(lower({column}), '[^[:alnum:]]+')) w WHERE w <> ''))")


def create(conn) -> None:
    """The index table (migration runs/0009): its layout differs between the databases."""
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute(f"CREATE TABLE {TABLE} (rollout_id bigint PRIMARY KEY REFERENCES {ROLLOUTS} (id) "
                           "ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED, run_id bigint NOT NULL, document tsvector NOT NULL)")
            cursor.execute(f"CREATE INDEX rollout_text_document ON {TABLE} USING gin (document)")
        else:
            cursor.execute(f"CREATE VIRTUAL TABLE {TABLE} USING fts5(document, rollout_id UNINDEXED, run_id UNINDEXED, "
                           "tokenize = 'unicode61 remove_diacritics 0')")


def drop(conn) -> None:
    with conn.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {TABLE}")


def words(q: str) -> list[str]:
    return WORD.findall(q.lower())


def catch_up(run_id: int, limit: int = BATCH) -> int:
    """Index up to `limit` of the run's rollouts not indexed yet, in one transaction; returns how many.
    Safe to run twice at once: the mark's row lock orders them and the second finds nothing new."""
    with transaction.atomic():
        TextIndexMark.objects.get_or_create(run_id=run_id)
        if connection.vendor == "postgresql":
            # as ingestion: the rollouts are the durable record, a lost batch is indexed again
            bulk.fetch("SET LOCAL synchronous_commit = off")
        lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
        ((through,),) = bulk.fetch(f"SELECT through FROM {MARKS} WHERE run_id = %s{lock}", [run_id])
        ((count, last),) = bulk.fetch(
            f"SELECT count(*), max(id) FROM (SELECT id FROM {ROLLOUTS} WHERE run_id = %s AND id > %s "
            f"ORDER BY id LIMIT %s) batch", [run_id, through, limit])
        if not count:
            return 0
        document = document_of("text") if connection.vendor == "postgresql" else "text"
        bulk.fetch(f"INSERT INTO {TABLE} (rollout_id, run_id, document) SELECT id, run_id, {document} FROM {ROLLOUTS} "
                   f"WHERE run_id = %s AND id > %s AND id <= %s", [run_id, through, last])
        bulk.fetch(f"UPDATE {MARKS} SET through = %s WHERE run_id = %s", [last, run_id])
        return count


def forget_run(sender, run, **kwargs) -> None:
    """A deleted run's texts (runs.signals.run_deleting), before its rollouts go: PostgreSQL's table would cascade
    from them, SQLite's FTS5 table has no keys."""
    texts = RolloutText.objects.filter(rollout_id__in=Rollout.objects.filter(run=run).values("id"))
    texts._raw_delete(texts.db)


def catch_up_fully(run_id: int) -> int:
    total = 0
    while done := catch_up(run_id):
        total += done
    return total


def matching(run_id: int, q: str, limit: int) -> tuple[RawSQL, int]:
    """A condition on the run's rollouts: their text has every word of q; and how many of the run's rollouts it
    cannot see (UNREAD_COUNT_CAP + 1 standing for more than the cap). Up to the run's mark it reads the index, after it the texts themselves, but no more than
    settings.TEXT_SEARCH_UNINDEXED_MAX of them: an index far behind (a supervisor restarted on a large run, a run
    stored before the index) would have a search read every unindexed text, minutes on a server thread at a
    million rollouts. The rollouts past those are not searched, and the count says so.

    Two ways to use the index, chosen by how many rollouts hold the words (counted up to a cap): a rare
    query collects its matches first and the page is sorted from them (cost: the matches); a common
    one walks the page's order index and checks each rollout's words by primary key until the page is
    full (cost: about limit / share of matches rows, a few microseconds each). PostgreSQL's planner
    only ever considers the first, which took 0.7 s for a word in every text of 100,000 rollouts."""
    found = bulk.fetch(f"SELECT through FROM {MARKS} WHERE run_id = %s", [run_id])
    through = found[0][0] if found else 0
    # the first rollout past the unindexed ones read (an index walk of that many ids), and how many follow it
    stop = bulk.fetch(f"SELECT id FROM {ROLLOUTS} WHERE run_id = %s AND id > %s ORDER BY id LIMIT 1 OFFSET %s",
                      [run_id, through, settings.TEXT_SEARCH_UNINDEXED_MAX])
    stop = stop[0][0] if stop else None
    unread = 0
    if stop is not None:  # counted up to a cap, which bounds the count's own cost
        unread = bulk.fetch(f"SELECT count(*) FROM (SELECT 1 FROM {ROLLOUTS} WHERE run_id = %s AND id >= %s "
                            f"LIMIT %s) unread", [run_id, stop, UNREAD_COUNT_CAP + 1])[0][0]
    before_stop = f" AND {ROLLOUTS}.id < {int(stop)}" if stop is not None else ""
    return _condition(run_id, q, limit, through, before_stop), unread


def _condition(run_id: int, q: str, limit: int, through: int, before_stop: str) -> RawSQL:
    terms = words(q)
    if connection.vendor == "postgresql":
        # letters and digits only: nothing to escape; cut as the index cuts them
        query = " & ".join(f"'{term[:MAX_WORD_CHARS]}'" for term in terms)
        cap = COMMON_PER_ROW * limit
        ((count,),) = bulk.fetch(f"SELECT count(*) FROM (SELECT 1 FROM {TABLE} WHERE document @@ %s::tsquery "
                                 f"AND run_id = %s LIMIT %s) matches", [query, run_id, cap])
        tail = f"{ROLLOUTS}.id > %s{before_stop} AND {document_of(f'{ROLLOUTS}.text')} @@ %s::tsquery"
        if count >= cap:
            # OFFSET 0 keeps the EXISTS a per-row check: without it the planner turns it into the join
            return RawSQL(f"(EXISTS (SELECT 1 FROM {TABLE} t WHERE t.rollout_id = {ROLLOUTS}.id "
                          f"AND t.document @@ %s::tsquery OFFSET 0) OR ({tail}))", [query, through, query],
                          output_field=BooleanField())
        return RawSQL(f"({ROLLOUTS}.id IN (SELECT rollout_id FROM {TABLE} WHERE document @@ %s::tsquery AND run_id = %s "
                      f"AND rollout_id <= %s) OR ({tail}))", [query, run_id, through, through, query],
                      output_field=BooleanField())
    fts = " ".join('"' + term + '"' for term in terms)  # each word a quoted FTS5 string: AND of them all
    # after the mark, the same rule in Python (add_sqlite_functions): SQLite cannot run FTS5's tokenizer
    # on a column
    return RawSQL(f"({ROLLOUTS}.id IN (SELECT CAST(rollout_id AS integer) FROM {TABLE} WHERE {TABLE} MATCH %s "
                  f"AND run_id = %s AND rollout_id <= %s) OR ({ROLLOUTS}.id > %s{before_stop} "
                  f"AND evolab_has_words({ROLLOUTS}.text, %s)))",
                  [fts, run_id, through, through, q], output_field=BooleanField())


def add_sqlite_functions(sender, connection, **kwargs) -> None:
    """On each new SQLite connection (the connection_created signal, RunsConfig.ready)."""
    if connection.vendor == "sqlite":
        connection.connection.create_function("evolab_has_words", 2, _has_words, deterministic=True)


def _has_words(text: str, q: str) -> bool:
    return _word_set(q) <= set(words(text or ""))


@functools.lru_cache(maxsize=64)
def _word_set(q: str) -> frozenset:
    return frozenset(words(q))  # the same query for every row of a search

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
import re

from django.db import connection, transaction

from . import bulk
from .models import Rollout, RolloutText, TextIndexMark

TABLE, ROLLOUTS, MARKS = RolloutText._meta.db_table, Rollout._meta.db_table, TextIndexMark._meta.db_table
BATCH = 2000  # rollouts indexed per transaction: a poll's worth at the papers' 8 x 64, about 0.5 s of work
WORD = re.compile(r"[^\W_]+")  # a word as SQLite's unicode61 tokenizer cuts them
# PostgreSQL: a text's words as a tsvector, cut by the same rule
DOCUMENT = "array_to_tsvector(array_remove(regexp_split_to_array(lower(text), '[^[:alnum:]]+'), ''))"


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
        document = DOCUMENT if connection.vendor == "postgresql" else "text"
        bulk.fetch(f"INSERT INTO {TABLE} (rollout_id, run_id, document) SELECT id, run_id, {document} FROM {ROLLOUTS} "
                   f"WHERE run_id = %s AND id > %s AND id <= %s", [run_id, through, last])
        bulk.fetch(f"UPDATE {MARKS} SET through = %s WHERE run_id = %s", [last, run_id])
        return count


def catch_up_fully(run_id: int) -> int:
    total = 0
    while done := catch_up(run_id):
        total += done
    return total


def matching(run_id: int, q: str) -> tuple[str, list]:
    """SQL selecting the ids of the run's rollouts whose text has every word of q, and its parameters:
    the index up to the run's mark, the texts themselves after it."""
    found = bulk.fetch(f"SELECT through FROM {MARKS} WHERE run_id = %s", [run_id])
    through = found[0][0] if found else 0
    terms = words(q)
    if connection.vendor == "postgresql":
        query = " & ".join(f"'{term}'" for term in terms)  # letters and digits only: nothing to escape
        return (f"SELECT rollout_id FROM {TABLE} WHERE document @@ %s::tsquery AND run_id = %s AND rollout_id <= %s "
                f"UNION ALL SELECT id FROM {ROLLOUTS} WHERE run_id = %s AND id > %s AND {DOCUMENT} @@ %s::tsquery",
                [query, run_id, through, run_id, through, query])
    fts = " ".join('"' + term + '"' for term in terms)  # each word a quoted FTS5 string: AND of them all
    # after the mark, the same rule in Python (SQLite cannot run FTS5's tokenizer on a column)
    connection.ensure_connection()
    connection.connection.create_function("evolab_has_words", 2, _has_words, deterministic=True)
    return (f"SELECT CAST(rollout_id AS integer) FROM {TABLE} WHERE {TABLE} MATCH %s AND run_id = %s AND rollout_id <= %s "
            f"UNION ALL SELECT id FROM {ROLLOUTS} WHERE run_id = %s AND id > %s AND evolab_has_words(text, %s)",
            [fts, run_id, through, run_id, through, q])


def _has_words(text: str, q: str) -> bool:
    return set(words(q)) <= set(words(text or ""))

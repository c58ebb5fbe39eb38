from django.apps import AppConfig


class ExplorerConfig(AppConfig):
    """The rollout explorer: a run's groups, the search over its rollouts (and their text index), one prompt's
    history, the exports. It reads the runs app's rows (Rollout, Group) and keeps its own text index of them
    (RolloutText, TextIndexMark); the runs app never imports it, and tells it of a deleted run by a signal."""

    name = "webapp.explorer"
    label = "explorer"

    def ready(self):
        from django.db.backends.signals import connection_created

        from webapp.runs import table_statistics
        from webapp.runs.signals import run_deleting

        from .models import RolloutText, TextIndexMark
        from .text_search import add_sqlite_functions, forget_run

        connection_created.connect(add_sqlite_functions, dispatch_uid="evolab-sqlite-functions")
        run_deleting.connect(forget_run, dispatch_uid="evolab-forget-run-texts")
        # the text index is filled behind ingestion, and its statistics checked with the ingested tables'
        table_statistics.watch(RolloutText._meta.db_table, TextIndexMark._meta.db_table)

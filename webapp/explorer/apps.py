from django.apps import AppConfig


class ExplorerConfig(AppConfig):
    """The rollout explorer: a run's groups, the search over its rollouts (and their text index), one prompt's
    history, the exports. Its rows are the runs app's (Rollout, Group, RolloutText): it reads them, and the
    runs app never imports it."""

    name = "webapp.explorer"
    label = "explorer"

    def ready(self):
        from django.db.backends.signals import connection_created

        from .text_search import add_sqlite_functions

        connection_created.connect(add_sqlite_functions, dispatch_uid="evolab-sqlite-functions")

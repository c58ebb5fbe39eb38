from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "webapp.runs"
    label = "runs"

    def ready(self):
        from django.db.backends.signals import connection_created

        from .text_search import add_sqlite_functions

        connection_created.connect(add_sqlite_functions, dispatch_uid="evolab-sqlite-functions")

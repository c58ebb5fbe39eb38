from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "webapp.runs"
    label = "runs"

    def ready(self):
        from django.db.backends.signals import connection_created
        from django.urls import register_converter

        from webapp.numbers import IdConverter

        from .text_search import add_sqlite_functions

        connection_created.connect(add_sqlite_functions, dispatch_uid="evolab-sqlite-functions")
        # <id:pk> in every URL module (pages, API, sockets): registered before any is imported
        register_converter(IdConverter, "id")

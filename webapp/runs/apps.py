from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "webapp.runs"
    label = "runs"

    def ready(self):
        from django.urls import register_converter

        from webapp.numbers import IdConverter

        # <id:pk> in every URL module (pages, API, sockets): registered before any is imported
        register_converter(IdConverter, "id")

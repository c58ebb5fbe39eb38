from django.apps import AppConfig


class ExternalConfig(AppConfig):
    """Runs trained elsewhere (DESIGN §4.8): MLflow's tracking protocol, the rollouts endpoint, and
    the worker steps that turn reported rollouts into groups with their health and heatmaps."""

    name = "webapp.external"
    label = "external"

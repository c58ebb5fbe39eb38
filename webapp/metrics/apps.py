from django.apps import AppConfig


class MetricsConfig(AppConfig):
    """The metric store: every run's series, points and chunks, read and written through webapp/metrics/series.py
    alone. Its tables were made by the runs app's migrations and keep their names (runs_metric*); its own
    migrations only took the models over (0001, state only)."""

    name = "webapp.metrics"
    label = "metrics"

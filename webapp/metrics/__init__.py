"""The metric store: a run's metric series, written by ingestion and read by the pages, the API, the exports
and the alert engine through webapp/metrics/series.py alone (issue 24)."""

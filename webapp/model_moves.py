"""A model moved from one app to another with its table kept (state-only migrations: metrics/0001, explorer/0001):
its content type, and so any permission granted on it, moves too."""
from django.db import migrations


def content_types_moved(models: list[str], from_label: str, to_label: str) -> migrations.RunPython:
    """The migration operation that relabels `models`' content types (reversed: back)."""
    def relabel(source, target):
        def move(apps, schema_editor):
            ContentType = apps.get_model("contenttypes", "ContentType")
            ContentType.objects.filter(app_label=source, model__in=models).update(app_label=target)
        return move

    return migrations.RunPython(relabel(from_label, to_label), relabel(to_label, from_label))

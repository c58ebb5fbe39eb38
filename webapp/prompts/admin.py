from django.contrib import admin

from .models import PromptSet


@admin.register(PromptSet)
class PromptSetAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "team", "row_count", "has_labels", "format", "owner", "created_at"]
    list_filter = ["team", "format", "has_labels"]
    search_fields = ["name"]
    readonly_fields = ["row_count", "has_labels", "format", "source_filename", "created_at"]

from django.contrib import admin

from .models import Run


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "team", "method", "state", "last_step", "created_by", "created_at"]
    list_filter = ["state", "method", "team"]
    search_fields = ["name"]
    readonly_fields = ["last_seq", "last_step", "exit_code", "stderr_tail", "created_at", "started_at", "finished_at"]
    raw_id_fields = ["prompt_set", "eval_prompt_set", "cloned_from", "created_by"]

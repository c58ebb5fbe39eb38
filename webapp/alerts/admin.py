from django.contrib import admin

from .models import Alert, TeamAlertRules, Webhook, WebhookDelivery


@admin.register(Alert)
class AlertAdmin(admin.ModelAdmin):
    list_display = ["id", "rule", "severity", "state", "run", "team", "step", "last_step", "created_at"]
    list_filter = ["state", "severity", "rule", "team"]
    raw_id_fields = ["run"]


@admin.register(TeamAlertRules)
class TeamAlertRulesAdmin(admin.ModelAdmin):
    list_display = ["team", "updated_at", "updated_by"]


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    list_display = ["id", "team", "url", "active", "created_at"]
    list_filter = ["team", "active"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = ["id", "webhook", "alert", "event", "status", "attempts", "response_code", "created_at"]
    list_filter = ["status", "event"]
    raw_id_fields = ["alert"]

from django.contrib import admin

from .models import ApiToken, Membership, Team


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["team", "user", "role", "created_at"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "team__name"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    # Only the digest is stored; the admin can revoke a token, never read one.
    list_display = ["user", "name", "created_at", "last_used_at"]
    readonly_fields = ["digest", "created_at", "last_used_at"]
    search_fields = ["user__username", "name"]

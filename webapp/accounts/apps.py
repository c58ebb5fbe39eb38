from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class AccountsConfig(AppConfig):
    name = "webapp.accounts"
    label = "accounts"
    default = True

    def ready(self):
        from . import signals  # needs the models, so only once they are loaded

        signals.connect()


class EvolabAdminConfig(admin_apps.AdminConfig):
    """django.contrib.admin with a sign-in throttled like the site's (webapp/accounts/sign_in.py)."""
    default = False  # AdminConfig says True; this module's default is AccountsConfig
    default_site = "webapp.accounts.sign_in.ThrottledAdminSite"

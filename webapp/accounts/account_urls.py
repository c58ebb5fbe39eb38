from django.urls import path

from . import account_views

app_name = "account"
urlpatterns = [
    path("", account_views.account, name="page"),
]

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from webapp.accounts.set_password import SetPasswordView
from webapp.accounts.sign_in import SignInView
from webapp.external.views import eval_generations, imports
from webapp.runs.views import healthz

urlpatterns = [
    path("healthz", healthz),
    # browsers ask for /favicon.ico whatever the page's <link rel="icon"> says
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("accounts/login/", SignInView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/set-password/<uidb64>/<token>/", SetPasswordView.as_view(), name="set_password"),
    path("account/", include("webapp.accounts.account_urls")),
    path("admin/", admin.site.urls),
    path("api/", include("webapp.api_urls")),
    path("mlflow/", include("webapp.external.urls")),
    path("prompt-sets/", include("webapp.prompts.urls")),
    path("teams/", include("webapp.accounts.urls")),
    path("teams/", include("webapp.alerts.urls")),
    path("runs/<id:pk>/evaluation/", eval_generations, name="eval_generations"),
    path("imports/", imports, name="imports"),
    path("", include("webapp.explorer.urls")),  # before the runs' runs/<id>/<action>/
    path("", include("webapp.runs.urls")),
]

handler403 = "webapp.accounts.views.forbidden"
handler400 = "webapp.api.bad_request"
handler404 = "webapp.api.not_found"
handler500 = "webapp.api.server_error"

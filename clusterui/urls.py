from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path

from clusterui.accounts import oidc_views
from clusterui.accounts.admin_login import admin_login
from clusterui.accounts.views import LoginView
from clusterui.api import token_pages as api_tokens
from clusterui.prometheus.views import metrics

urlpatterns = [
    path("", include("clusterui.web.urls")),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", oidc_views.SignOut.as_view(), name="logout"),
    # OpenID Connect sign-in (404 while OIDC_ISSUER is unset); the callback is the redirect
    # URI registered at the provider: https://<this host>/oidc/callback/
    path("oidc/authenticate/", login_not_required(oidc_views.Start.as_view()),
         name="oidc_authentication_init"),
    path("oidc/callback/", login_not_required(oidc_views.Callback.as_view()),
         name="oidc_authentication_callback"),
    # The admin signs in through the rate-limited sign-in page too.
    path("admin/login/", admin_login),
    path("admin/", admin.site.urls),
    path("", include("clusterui.ingest.urls")),
    path("", include("clusterui.alerts.urls")),
    path("api/v1/", include("clusterui.api.urls")),
    path("settings/tokens/", api_tokens.tokens, name="api_tokens"),
    path("settings/tokens/<int:pk>/revoke/", api_tokens.revoke, name="api_token_revoke"),
    path("metrics", metrics, name="metrics"),
]

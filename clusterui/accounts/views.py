from django.conf import settings
from django.contrib.auth import views as auth_views

from clusterui.accounts import ratelimit


class LoginView(auth_views.LoginView):
    """Django's sign-in, refusing further attempts for a while after repeated failures."""

    def post(self, request, *args, **kwargs):
        username = request.POST.get("username", "")
        address = ratelimit.client_address(request)
        if ratelimit.blocked(username, address):
            form = self.get_form()
            form.add_error(None, "Too many failed sign-in attempts. Try again in "
                           f"{settings.LOGIN_FAILURE_WINDOW_S // 60} minutes.")
            response = self.render_to_response(self.get_context_data(form=form))
            response.status_code = 429
            return response
        response = super().post(request, *args, **kwargs)
        if request.user.is_authenticated:
            ratelimit.reset(username)
        else:
            ratelimit.record_failure(username, address)
        return response

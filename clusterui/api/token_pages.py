"""The web UI's API token page: create a token (its key is shown once), see when each was
last used, revoke one."""

from django import forms
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from clusterui.api.models import ApiToken
from clusterui.api.tokens import TokenLimitReached, create_token

_NEW_KEY = "api_token_new_key"
_REVOKED = "api_token_revoked"


class TokenForm(forms.Form):
    name = forms.CharField(max_length=64, label="Name",
                           help_text="What it is for, e.g. 'laptop' or 'weekly report'")


def tokens(request):
    form = TokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            token, key = create_token(request.user, form.cleaned_data["name"])
        except TokenLimitReached as exc:
            form.add_error(None, str(exc))
        else:
            # Shown on the next page view only, then gone: the key is not stored.
            request.session[_NEW_KEY] = {"id": token.id, "name": token.name, "key": key}
            return redirect("api_tokens")
    return render(request, "api/tokens.html", {
        "form": form,
        "tokens": ApiToken.objects.filter(user=request.user),
        "new": request.session.pop(_NEW_KEY, None),
        "revoked": request.session.pop(_REVOKED, None),
    }, status=400 if form.errors else 200)


@require_POST
def revoke(request, pk):
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    token.delete()
    request.session[_REVOKED] = f"Token “{token.name}” ({token.prefix}…) is revoked: it no longer works."
    return redirect("api_tokens")

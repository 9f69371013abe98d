"""``/favicon.ico``: the site icon where a page does not name one.

The HTML pages link ``favicon.svg`` themselves; browsers still ask ``/favicon.ico`` for
what has no ``<link rel="icon">`` (the API's JSON and browsable pages, a bare file). It is
the same static file, served by WhiteNoise with its cache headers; no sign-in needed (a
browser asks before anyone signs in)."""

from django.contrib.auth.decorators import login_not_required
from django.contrib.staticfiles.storage import staticfiles_storage
from django.http import HttpResponseRedirect
from django.views.decorators.http import require_safe


@login_not_required
@require_safe
def favicon(request):
    return HttpResponseRedirect(staticfiles_storage.url("favicon.svg"))

"""Where the admin site sends a user it will not serve.

The admin signs in through the rate-limited sign-in page (``/login/``). A signed-in user
who is not staff and opens ``/admin/`` was sent there too, and saw the sign-in form again
with no word of why: they are told instead that the admin site is for staff.
"""


from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.urls import reverse


@login_not_required
def admin_login(request):
    if request.user.is_authenticated and not request.user.is_staff:
        raise PermissionDenied("The admin site is for staff.")
    query = request.META.get("QUERY_STRING", "")
    return redirect(reverse("login") + (f"?{query}" if query else ""))



from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.core import signing
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from clusterui.alerts import mailbox, window
from clusterui.alerts import preferences as prefs
from clusterui.alerts.choices import ALL, CATEGORY_HELP, JOB_END, category_label
from clusterui.alerts.models import AlertEmail
from clusterui.alerts.recipients import address_of


@require_http_methods(["GET", "POST"])
def preferences(request):
    """Which alert emails the signed-in user gets, the limits in force, and the last ones."""
    address = address_of(request.user)
    offered = prefs.categories_for(address, is_staff=request.user.is_staff)
    if request.method == "POST":
        if address is None:
            return _preferences_page(request, address, offered, status=400,
                                     error="ClusterUI has no email address for you, so there "
                                           "is nothing to change.")
        enabled = set(request.POST.getlist("enabled"))
        unknown = enabled - {category for category, _, _ in offered}
        if unknown:
            return _preferences_page(request, address, offered, status=400,
                                     error=f"Unknown category: {', '.join(sorted(unknown))}.")
        prefs.set_enabled(address, enabled, [category for category, _, _ in offered])
        prefs.set_every(address, JOB_END, request.POST.get("job_end_every") == "on")
        messages.success(request, "Your alert settings are saved.")
        return redirect("alert-preferences")
    return _preferences_page(request, address, offered)


def _preferences_page(request, address, offered, *, status=200, error=""):
    off = prefs.opted_out(address) if address else set()
    rows = [{"category": c, "label": label, "help": help_text,
             "enabled": ALL not in off and c not in off} for c, label, help_text in offered]
    every_job = prefs.wants_every(address, JOB_END) if address else False
    recent = (AlertEmail.objects.filter(to=address).select_related("job")[:20]
              if address else [])
    return render(request, "alerts/preferences.html", {
        "address": address,
        "address_pattern": bool(settings.ALERT_EMAIL_PATTERN),
        "rows": rows,
        "all_off": ALL in off,
        "job_end_every": every_job,
        "job_end_share_pct": 100.0 * settings.JOBEND_EMAIL_WASTE_SHARE,
        "job_end_min_minutes": settings.JOBEND_EMAIL_MIN_RUNTIME_S / 60.0,
        "recent": recent,
        "daily_limit": settings.ALERT_DAILY_LIMIT,
        "window": window.describe(),
        "window_restricted": window.restricted(),
        "min_severity": settings.ALERT_MIN_SEVERITY,
        "error": error,
    }, status=status)


@login_not_required
@csrf_exempt  # the signed token is the credential; mail clients' one-click POST has no CSRF
@require_http_methods(["GET", "POST"])
def unsubscribe(request, token):
    """The link in every email: GET asks to confirm (link scanners must not unsubscribe
    anyone), POST turns the category off. RFC 8058 one-click POSTs land here too."""
    try:
        address, category = prefs.read_unsubscribe_token(token)
    except signing.BadSignature:
        return render(request, "alerts/unsubscribe.html", {
            "error": "This unsubscribe link is not valid: it was changed or cut short. Use "
                     "the whole link from the email, or sign in and open your alert settings."},
            status=400)
    if category not in CATEGORY_HELP and category != ALL:
        return render(request, "alerts/unsubscribe.html", {
            "error": f"This link is for an email category ClusterUI no longer has "
                     f"({category})."}, status=400)
    context = {"address": address, "category": category,
               "category_label": category_label(category)}
    if request.method == "POST":
        action = request.POST.get("action", "unsubscribe")
        if action == "unsubscribe":
            prefs.opt_out(address, category)
        elif action == "all":
            prefs.opt_out(address, ALL)
        elif action == "resubscribe":
            prefs.opt_in(address, category)
        elif action in ("every", "default") and category == JOB_END:
            # The job-end summary's link also asks for it for every job, or only by default.
            prefs.opt_in(address, category)
            prefs.set_every(address, category, action == "every")
        else:
            context["error"] = (f"Unknown action: {action}. Use unsubscribe, all or "
                                f"resubscribe{', every or default' if category == JOB_END else ''}.")
            return render(request, "alerts/unsubscribe.html", context, status=400)
        context["done"] = action
    context["off"] = prefs.is_opted_out(address, category)
    if category == JOB_END:
        context["job_end"] = True
        context["every"] = prefs.wants_every(address, category)
        context["share_pct"] = 100.0 * settings.JOBEND_EMAIL_WASTE_SHARE
    return render(request, "alerts/unsubscribe.html", context)


def _mailbox_enabled():
    if not settings.DEMO_MAILBOX_DIR:
        raise Http404("The demo mailbox is off (DEMO_MAILBOX_DIR is not set).")


def demo_mailbox(request):
    """The demo's SMTP sink, read as a mailbox: staff see every message, others theirs."""
    _mailbox_enabled()
    return render(request, "alerts/mailbox.html", {
        "mails": mailbox.visible_messages(request.user),
        "address": address_of(request.user),
        "directory": settings.DEMO_MAILBOX_DIR,
    })


def demo_mail_message(request, key):
    _mailbox_enabled()
    mail = mailbox.visible_message(request.user, key)
    if mail is None:
        raise Http404("No such message in your demo mailbox.")
    return render(request, "alerts/mail_message.html", {"mail": mail})

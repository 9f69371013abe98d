from django.conf import settings


def alerts(request):
    """What the navigation needs: whether the demo's mailbox pages exist."""
    return {"demo_mailbox": bool(settings.DEMO_MAILBOX_DIR)}

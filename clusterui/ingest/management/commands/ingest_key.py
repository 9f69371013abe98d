import secrets

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from clusterui.ingest.models import IngestKey


class Command(BaseCommand):
    help = ("Manage clusters' ingest keys: create (prints the secret once), list, revoke. "
            "Rotate by creating a new key, moving the collectors to it, then revoking the old.")

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a key for a cluster")
        create.add_argument("cluster")
        create.add_argument("--key-id", help="default: <cluster>-<n>")
        create.add_argument("--secret", help="default: 32 random bytes, URL-safe")
        ensure = sub.add_parser("ensure", help="create this exact key unless it exists")
        ensure.add_argument("cluster")
        ensure.add_argument("--key-id", required=True)
        ensure.add_argument("--secret", required=True)
        sub.add_parser("list", help="list keys (never secrets)")
        revoke = sub.add_parser("revoke", help="revoke a key: its batches are refused")
        revoke.add_argument("cluster")
        revoke.add_argument("key_id")

    def handle(self, *args, **o):
        getattr(self, f"_{o['action']}")(o)

    def _create(self, o):
        cluster = o["cluster"]
        key_id = o["key_id"] or f"{cluster}-{IngestKey.objects.filter(cluster=cluster).count() + 1}"
        secret = o["secret"] or secrets.token_urlsafe(32)
        if len(secret) < 16:
            raise CommandError("--secret must be at least 16 characters")
        if IngestKey.objects.filter(cluster=cluster, key_id=key_id).exists():
            raise CommandError(f"cluster {cluster!r} already has a key {key_id!r}")
        IngestKey.objects.create(cluster=cluster, key_id=key_id, secret=secret)
        self.stdout.write(f"cluster={cluster}\ningest_key_id={key_id}\ningest_key={secret}")

    def _ensure(self, o):
        key, created = IngestKey.objects.get_or_create(
            cluster=o["cluster"], key_id=o["key_id"], defaults={"secret": o["secret"]})
        if key.secret != o["secret"] or key.revoked_at:
            raise CommandError(f"key {o['key_id']!r} of {o['cluster']!r} exists with another "
                               "secret or is revoked")
        self.stdout.write(f"{'created' if created else 'kept'} {key}")

    def _list(self, o):
        for key in IngestKey.objects.all():
            state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
            self.stdout.write(f"{key.cluster}\t{key.key_id}\t{state}\tcreated "
                              f"{key.created_at:%Y-%m-%d %H:%M}")

    def _revoke(self, o):
        updated = IngestKey.objects.filter(cluster=o["cluster"], key_id=o["key_id"],
                                           revoked_at__isnull=True).update(revoked_at=timezone.now())
        if not updated:
            raise CommandError(f"no active key {o['key_id']!r} for cluster {o['cluster']!r}")
        self.stdout.write(f"revoked {o['cluster']}/{o['key_id']}: collectors using it are now "
                          "refused (within 30 s on every worker)")

import secrets

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from clusterui.ingest.models import IngestKey
from collectors import signing


class Command(BaseCommand):
    help = ("Manage clusters' ingest keys: create (prints the cluster secret once), derive "
            "(a node's own key), list, cluster-signatures (on/off), revoke. Rotate by "
            "creating a new key, moving the collectors to it, then revoking the old.")

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="create a key for a cluster")
        create.add_argument("cluster")
        create.add_argument("--key-id", help="default: <cluster>-<n>")
        create.add_argument("--secret", help="default: 32 random bytes, URL-safe")
        create.add_argument("--allow-cluster-signatures", action="store_true",
                            help="also accept batches signed with the cluster secret itself "
                                 "(for collectors not yet given node keys)")
        ensure = sub.add_parser("ensure", help="create this exact key unless it exists")
        ensure.add_argument("cluster")
        ensure.add_argument("--key-id", required=True)
        ensure.add_argument("--secret", required=True)
        ensure.add_argument("--allow-cluster-signatures", action="store_true",
                            help="when creating it: as for create")
        derive = sub.add_parser("derive", help="print a node's own key (HKDF of the cluster "
                                               "secret and the node name)")
        derive.add_argument("cluster")
        derive.add_argument("node")
        derive.add_argument("--key-id", help="default: the cluster's newest active key")
        sub.add_parser("list", help="list keys (never secrets)")
        toggle = sub.add_parser("cluster-signatures",
                                help="accept (on) or refuse (off) batches signed with the "
                                     "cluster secret itself rather than a node key")
        toggle.add_argument("cluster")
        toggle.add_argument("key_id")
        toggle.add_argument("state", choices=["on", "off"])
        revoke = sub.add_parser("revoke", help="revoke a key: its batches are refused")
        revoke.add_argument("cluster")
        revoke.add_argument("key_id")

    def handle(self, *args, **o):
        getattr(self, f"_{o['action'].replace('-', '_')}")(o)

    def _create(self, o):
        cluster = o["cluster"]
        key_id = o["key_id"] or f"{cluster}-{IngestKey.objects.filter(cluster=cluster).count() + 1}"
        secret = o["secret"] or secrets.token_urlsafe(32)
        if len(secret) < 16:
            raise CommandError("--secret must be at least 16 characters")
        if signing.is_node_key(secret):
            raise CommandError(f"--secret must not start with {signing.NODE_KEY_PREFIX!r} "
                               "(that marks a derived node key)")
        if IngestKey.objects.filter(cluster=cluster, key_id=key_id).exists():
            raise CommandError(f"cluster {cluster!r} already has a key {key_id!r}")
        IngestKey.objects.create(cluster=cluster, key_id=key_id, secret=secret,
                                 allow_cluster_signatures=o["allow_cluster_signatures"])
        self.stdout.write(f"cluster={cluster}\ningest_key_id={key_id}\ningest_key={secret}")
        self.stderr.write("This is the cluster secret: keep it in configuration management "
                          "and give each node only its own key (ingest_key derive).")

    def _ensure(self, o):
        if signing.is_node_key(o["secret"]):
            raise CommandError(f"--secret must not start with {signing.NODE_KEY_PREFIX!r}")
        key, created = IngestKey.objects.get_or_create(
            cluster=o["cluster"], key_id=o["key_id"],
            defaults={"secret": o["secret"],
                      "allow_cluster_signatures": o["allow_cluster_signatures"]})
        if key.secret != o["secret"] or key.revoked_at:
            raise CommandError(f"key {o['key_id']!r} of {o['cluster']!r} exists with another "
                               "secret or is revoked")
        self.stdout.write(f"{'created' if created else 'kept'} {key}")

    def _derive(self, o):
        keys = IngestKey.objects.filter(cluster=o["cluster"], revoked_at__isnull=True)
        if o["key_id"]:
            keys = keys.filter(key_id=o["key_id"])
        key = keys.order_by("-created_at", "-id").first()
        if key is None:
            raise CommandError(f"no active key{' ' + repr(o['key_id']) if o['key_id'] else ''}"
                               f" for cluster {o['cluster']!r}")
        try:
            node_key = signing.derive_node_key(key.secret, key.cluster, o["node"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"cluster={key.cluster}\nnode={o['node']}\n"
                          f"ingest_key_id={key.key_id}\ningest_key={node_key}")

    def _list(self, o):
        for key in IngestKey.objects.all():
            state = f"revoked {key.revoked_at:%Y-%m-%d %H:%M}" if key.revoked_at else "active"
            scope = ("node and cluster-wide signatures" if key.allow_cluster_signatures
                     else "node signatures only")
            self.stdout.write(f"{key.cluster}\t{key.key_id}\t{state}\t{scope}\tcreated "
                              f"{key.created_at:%Y-%m-%d %H:%M}")

    def _cluster_signatures(self, o):
        allow = o["state"] == "on"
        updated = IngestKey.objects.filter(cluster=o["cluster"], key_id=o["key_id"],
                                           revoked_at__isnull=True).update(
            allow_cluster_signatures=allow)
        if not updated:
            raise CommandError(f"no active key {o['key_id']!r} for cluster {o['cluster']!r}")
        self.stdout.write(
            f"{o['cluster']}/{o['key_id']}: cluster-wide signatures "
            + ("accepted again" if allow else "refused: only node keys sign now")
            + " (within 30 s on every worker)")

    def _revoke(self, o):
        updated = IngestKey.objects.filter(cluster=o["cluster"], key_id=o["key_id"],
                                           revoked_at__isnull=True).update(revoked_at=timezone.now())
        if not updated:
            raise CommandError(f"no active key {o['key_id']!r} for cluster {o['cluster']!r}")
        self.stdout.write(f"revoked {o['cluster']}/{o['key_id']}: collectors using it are now "
                          "refused (within 30 s on every worker)")

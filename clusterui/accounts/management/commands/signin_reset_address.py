"""Let an address sign in again: forget its failures in the attempt gate and django-axes."""

import ipaddress

from axes.utils import reset
from django.core.management.base import BaseCommand, CommandError

from clusterui.accounts import attempt_gate


class Command(BaseCommand):
    help = ("Forget an address's sign-in failures: its count across user names (the "
            "attempt gate) and every (user name, address) lockout django-axes holds for it.")

    def add_arguments(self, parser):
        parser.add_argument("addresses", nargs="+", metavar="ADDRESS")

    def handle(self, *args, addresses, **options):
        for address in addresses:
            try:
                address = str(ipaddress.ip_address(address))
            except ValueError:
                raise CommandError(f"{address!r} is not an IP address") from None
            counted = attempt_gate.reset_address(address)
            locks = reset(ip=address)
            self.stdout.write(f"{address}: address count {'cleared' if counted else 'was empty'}"
                              f", {locks} django-axes attempt record(s) removed")

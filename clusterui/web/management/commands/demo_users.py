from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

DEMO_PASSWORD = "clusterui-demo"
# The simulator's users: each can sign in and see their own jobs.
RESEARCHERS = ("alice", "bob", "carol", "dave", "erin", "frank")


class Command(BaseCommand):
    help = "Create the demo's logins: admin (staff) and the simulated cluster's researchers."

    def handle(self, *args, **options):
        User = get_user_model()
        admin, _ = User.objects.get_or_create(username="admin", defaults={
            "email": "admin@localhost", "is_staff": True, "is_superuser": True})
        admin.set_password(DEMO_PASSWORD)
        admin.save()
        for name in RESEARCHERS:
            user, _ = User.objects.get_or_create(username=name,
                                                 defaults={"email": f"{name}@localhost"})
            user.set_password(DEMO_PASSWORD)
            user.save()
        self.stdout.write(f"demo logins ready: admin, {', '.join(RESEARCHERS)}")

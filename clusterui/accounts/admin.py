from django.contrib import admin

from clusterui.accounts.models import ClusterLogin


@admin.register(ClusterLogin)
class ClusterLoginAdmin(admin.ModelAdmin):
    """A user's scheduler name on one cluster, where it differs from their usual one."""

    list_display = ("user", "cluster", "scheduler_user")
    list_filter = ("cluster",)
    search_fields = ("user__username", "scheduler_user")
    autocomplete_fields = ("user",)

from django.contrib import admin

from clusterui.alerts.models import AlertEmail, DailyCount, DigestRun, OptOut


@admin.register(AlertEmail)
class AlertEmailAdmin(admin.ModelAdmin):
    list_display = ("created_at", "to", "category", "severity", "role", "status", "attempts",
                    "next_attempt_at", "sent_at")
    list_filter = ("status", "category", "role", "severity")
    search_fields = ("to", "username", "subject")
    raw_id_fields = ("finding", "job")
    readonly_fields = ("created_at", "sent_at", "message_id", "last_error")
    date_hierarchy = "created_at"


@admin.register(OptOut)
class OptOutAdmin(admin.ModelAdmin):
    list_display = ("address", "category", "created_at")
    search_fields = ("address",)


@admin.register(DailyCount)
class DailyCountAdmin(admin.ModelAdmin):
    list_display = ("day", "address", "sent")
    search_fields = ("address",)


@admin.register(DigestRun)
class DigestRunAdmin(admin.ModelAdmin):
    list_display = ("day", "created_at", "open_findings")

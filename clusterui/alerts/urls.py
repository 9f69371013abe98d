from django.urls import path

from clusterui.alerts import views

urlpatterns = [
    path("settings/alerts/", views.preferences, name="alert-preferences"),
    path("alerts/unsubscribe/<str:token>/", views.unsubscribe, name="alert-unsubscribe"),
    path("demo/mail/", views.demo_mailbox, name="demo-mailbox"),
    path("demo/mail/<str:key>/", views.demo_mail_message, name="demo-mail-message"),
]

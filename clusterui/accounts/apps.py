from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "clusterui.accounts"
    label = "accounts"
    verbose_name = "Accounts"

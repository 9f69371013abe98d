"""The claims the test provider sends, through django-oidc-provider's documented hooks
(OIDC_USERINFO, OIDC_EXTRA_SCOPE_CLAIMS, OIDC_IDTOKEN_PROCESSING_HOOK; see its docs,
"Standard claims", "Scopes" and "Settings")."""

from oidc_provider.lib.claims import ScopeClaims

from tests.accounts.oidc_provider.people import HPC_USERS, OTHER_CLIENT_ID


def userinfo(claims, user):
    claims.update({"preferred_username": user.username, "given_name": user.first_name,
                   "family_name": user.last_name, "name": user.get_full_name(),
                   "email": user.email, "email_verified": True})
    return claims


class SiteClaims(ScopeClaims):
    info_groups = ("Groups", "The groups you are in.")
    info_hpc = ("Cluster account", "Your user name on the cluster.")

    def scope_groups(self):
        # As Keycloak's "Group Membership" mapper (full path off) and Okta's groups claim.
        return {"groups": sorted(self.user.groups.values_list("name", flat=True))}

    def scope_hpc(self):
        return {"hpc_user": HPC_USERS[self.user.username]}


def spoil_for_tests(id_token, user, **kwargs):
    """Two users whose ID tokens, still signed with the provider's key, must be refused:
    mallory's names another application as its audience, erin's expired an hour ago."""
    if user.username == "mallory":
        id_token["aud"] = OTHER_CLIENT_ID
    if user.username == "erin":
        id_token["exp"] = id_token["iat"] - 3600
    return id_token

"""The groups a directory user is in, as LDAP_GROUP_FILTER finds them: a django-auth-ldap
group type (its documented extension point, ``LDAPGroupType``) for a filter that may name
the user by login (``posixGroup``'s ``memberUid``) and by DN (``groupOfNames``' ``member``,
``groupOfUniqueNames``' ``uniqueMember``) at once, which none of its own types does. A
group's name is its ``cn``."""

from django_auth_ldap.config import LDAPGroupType


class FilterGroupType(LDAPGroupType):
    def __init__(self, filter_template: str, name_attr: str = "cn"):
        """``filter_template``: the filter with ``%(login)s`` and ``%(dn)s``, each filled
        in escaped (django-auth-ldap's LDAPSearch.execute)."""
        super().__init__(name_attr)
        self.filter_template = filter_template

    def user_groups(self, ldap_user, group_search):
        # The login as typed, which django-auth-ldap's _LDAPUser keeps only privately: our
        # backend (a new instance per sign-in, as Django builds them) holds it
        # (clusterui/accounts/ldap_backend.py, LDAPBackend.authenticate).
        login = ldap_user.backend.login
        search = group_search.search_with_additional_term_string(self.filter_template)
        return search.execute(ldap_user.connection, {"login": login, "dn": ldap_user.dn})

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
        # The login as typed: _LDAPUser keeps it as _username (django_auth_ldap/backend.py,
        # django-auth-ldap 5.4.0), with no public name before the Django user is built.
        search = group_search.search_with_additional_term_string(self.filter_template)
        return search.execute(ldap_user.connection,
                              {"login": ldap_user._username, "dn": ldap_user.dn})

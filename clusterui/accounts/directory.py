"""The LDAP conversation of a sign-in, over ldap3 (pure Python: no libldap to build).

Search, then bind: the service account (LDAP_BIND_DN, or an anonymous bind) finds the one
entry that LDAP_USER_FILTER matches for the login, the user's password is checked by
binding as that entry, and the groups whose LDAP_GROUP_FILTER names the user are read.
A directory that cannot be reached, or refuses the service account, raises
``ldap3.core.exceptions.LDAPException``; a wrong password or an unknown login is None.
"""

import logging
import ssl
from dataclasses import dataclass, field

import ldap3
from ldap3.core.exceptions import LDAPBindError
from ldap3.utils.conv import escape_filter_chars

log = logging.getLogger(__name__)


@dataclass
class Entry:
    dn: str
    attributes: dict[str, str]
    groups: set[str] = field(default_factory=set)


def _server(config: dict) -> ldap3.Server:
    tls = None
    if config["START_TLS"] or config["SERVER_URI"].startswith("ldaps://"):
        tls = ldap3.Tls(validate=ssl.CERT_REQUIRED, ca_certs_file=config["CA_FILE"] or None)
    return ldap3.Server(config["SERVER_URI"], tls=tls, get_info=ldap3.NONE,
                        connect_timeout=config["TIMEOUT_S"])


def _bound(config: dict, server: ldap3.Server, dn: str | None, password: str | None):
    """A connection bound as ``dn`` (anonymous when None), or None when the bind is refused."""
    conn = ldap3.Connection(server, user=dn, password=password, read_only=True,
                            receive_timeout=config["TIMEOUT_S"], raise_exceptions=False)
    conn.open()
    if config["START_TLS"]:
        conn.start_tls()
    if conn.bind():
        return conn
    conn.unbind()
    return None


def _first(values) -> str:
    if isinstance(values, list | tuple):
        return str(values[0]) if values else ""
    return "" if values is None else str(values)


def check_password(config: dict, login: str, password: str,
                   attributes: list[str]) -> Entry | None:
    if not password:  # an empty password is an unauthenticated bind: it always "succeeds"
        return None
    server = _server(config)
    service = _bound(config, server, config["BIND_DN"] or None, config["BIND_PASSWORD"] or None)
    if service is None:
        raise LDAPBindError(f"the directory refused the service bind as "
                            f"{config['BIND_DN'] or 'anonymous'}")
    try:
        service.search(config["USER_SEARCH_BASE"],
                       config["USER_FILTER"].format(login=escape_filter_chars(login)),
                       search_scope=ldap3.SUBTREE, attributes=attributes, size_limit=2)
        found = [e for e in service.response if e.get("type") == "searchResEntry"]
        if len(found) != 1:
            if found:
                log.warning("LDAP: %d entries match the login %r; refusing it", len(found),
                            login)
            return None
        dn = found[0]["dn"]
        user = _bound(config, server, dn, password)
        if user is None:
            return None
        user.unbind()
        entry = Entry(dn, {k: _first(v) for k, v in found[0]["attributes"].items()})
        if config["GROUP_SEARCH_BASE"]:
            service.search(config["GROUP_SEARCH_BASE"],
                           config["GROUP_FILTER"].format(login=escape_filter_chars(login),
                                                         dn=escape_filter_chars(dn)),
                           search_scope=ldap3.SUBTREE, attributes=["cn"])
            entry.groups = {str(cn) for e in service.response
                            if e.get("type") == "searchResEntry"
                            for cn in e["attributes"].get("cn", [])}
        return entry
    finally:
        service.unbind()

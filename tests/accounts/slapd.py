"""A private OpenLDAP for the LDAP sign-in tests: Debian's slapd (``scripts/devstack.py
slapd`` installs it), started on a free port from a generated slapd.conf and a database
directory of its own, loaded with slapadd from the LDIF below. The system's slapd, if any,
is never touched."""

import os
import socket
import subprocess
import time
from pathlib import Path

SLAPD, SLAPADD = "/usr/sbin/slapd", "/usr/sbin/slapadd"
SUFFIX = "dc=example,dc=org"
ROOT_DN, ROOT_PASSWORD = f"cn=admin,{SUFFIX}", "root-secret"
SERVICE_DN, SERVICE_PASSWORD = f"cn=clusterui,{SUFFIX}", "service-secret"
PEOPLE, GROUPS = f"ou=people,{SUFFIX}", f"ou=groups,{SUFFIX}"
PASSWORDS = {"alice": "alice-ldap-pw", "bob": "bob-ldap-pw", "carol": "carol-ldap-pw"}

CONFIG = """\
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/nis.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile {dir}/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
maxsize 10485760
suffix "{suffix}"
rootdn "{root_dn}"
rootpw {root_password}
directory {dir}/db
access to attrs=userPassword by anonymous auth by * none
access to * by users read by * none
"""


def _person(uid: str, number: int, given: str, sn: str) -> str:
    return f"""dn: uid={uid},{PEOPLE}
objectClass: inetOrgPerson
objectClass: posixAccount
uid: {uid}
cn: {given} {sn}
givenName: {given}
sn: {sn}
mail: {uid}@example.org
uidNumber: {number}
gidNumber: {number}
homeDirectory: /home/{uid}
userPassword: {PASSWORDS[uid]}
"""


LDIF = "\n".join([
    f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\n"
    "o: Example\n",
    f"dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people\n",
    f"dn: {GROUPS}\nobjectClass: organizationalUnit\nou: groups\n",
    f"dn: {SERVICE_DN}\nobjectClass: organizationalRole\nobjectClass: simpleSecurityObject\n"
    f"cn: clusterui\nuserPassword: {SERVICE_PASSWORD}\n",
    _person("alice", 1001, "Alice", "Archer"),
    _person("bob", 1002, "Bob", "Baker"),
    _person("carol", 1003, "Carol", "Cooper"),
    # Staff: a posixGroup (memberUid); researchers: a groupOfNames (member DNs).
    f"dn: cn=hpc-admins,{GROUPS}\nobjectClass: posixGroup\ncn: hpc-admins\n"
    "gidNumber: 5000\nmemberUid: bob\n",
    f"dn: cn=researchers,{GROUPS}\nobjectClass: groupOfNames\ncn: researchers\n"
    f"member: uid=alice,{PEOPLE}\nmember: uid=carol,{PEOPLE}\n",
    # Account leaders (LDAP_ACCOUNT_LEADER_GROUP_PREFIX "lead-"): carol leads nlp.
    f"dn: cn=lead-nlp,{GROUPS}\nobjectClass: groupOfNames\ncn: lead-nlp\n"
    f"member: uid=carol,{PEOPLE}\n",
])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(workdir: Path) -> tuple[subprocess.Popen, str]:
    """slapd on a free port, loaded; the caller stops the process."""
    for binary in (SLAPD, SLAPADD):
        assert os.path.exists(binary), (
            f"Debian's slapd is missing ({binary}): python scripts/devstack.py slapd "
            "installs it")
    (workdir / "db").mkdir(parents=True)
    config = workdir / "slapd.conf"
    config.write_text(CONFIG.format(dir=workdir, suffix=SUFFIX, root_dn=ROOT_DN,
                                    root_password=ROOT_PASSWORD))
    (workdir / "fixture.ldif").write_text(LDIF)
    subprocess.run([SLAPADD, "-f", str(config), "-l", str(workdir / "fixture.ldif")],
                   check=True, capture_output=True)
    port = free_port()
    log = open(workdir / "slapd.log", "w")  # noqa: SIM115 (the child holds it)
    # -d keeps slapd in the foreground, a child of the test session.
    process = subprocess.Popen([SLAPD, "-f", str(config), "-h", f"ldap://127.0.0.1:{port}/",
                                "-d", "0"], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("slapd did not start: "
                                   + (workdir / "slapd.log").read_text()[-2000:]) from None
            time.sleep(0.1)
    return process, f"ldap://127.0.0.1:{port}"

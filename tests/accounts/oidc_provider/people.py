"""Who the test provider knows: passwords, groups, and each person's scheduler account (the
``hpc_user`` claim of the ``hpc`` scope). ``mallory`` and ``erin`` are real users whose ID
tokens the provider spoils on purpose (claims.py: another audience, already expired)."""

PASSWORDS = {"alice": "alice-oidc-pw", "bob": "bob-oidc-pw", "carol": "carol-oidc-pw",
             "mallory": "mallory-oidc-pw", "erin": "erin-oidc-pw"}
GROUPS = {"hpc-admins": ["bob"], "researchers": ["alice", "carol"], "lead-nlp": ["carol"]}
HPC_USERS = {"alice": "alice", "bob": "bob", "carol": "cc0042", "mallory": "mallory",
             "erin": "erin"}
NAMES = {"alice": ("Alice", "Archer"), "bob": ("Bob", "Baker"), "carol": ("Carol", "Cooper"),
         "mallory": ("Mallory", "Moss"), "erin": ("Erin", "Eames")}

CLIENT_ID, CLIENT_SECRET = "clusterui", "clusterui-oidc-secret"
OTHER_CLIENT_ID = "another-app"
# django.test.Client's host: where ClusterUI's callback is when the tests drive it.
REDIRECT_URI = "http://testserver/oidc/callback/"
# Where the provider sends the browser back after its sign-out: ClusterUI's sign-in page.
POST_LOGOUT_REDIRECT_URI = "http://testserver/login/"

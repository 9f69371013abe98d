#!/bin/sh
# Start Redis with two users, so that a GPU node's credentials can do nothing but queue
# batches:
#   default   the server's user (web, ingest consumers, Celery, the sign-in rate limiter's
#             cache): every key and command, password REDIS_PASSWORD.
#   collector what a collector's publish needs and nothing else: push onto the "ingest"
#             list, read the queue lengths kombu checks, and add kombu's two routing-table
#             entries for that queue; password REDIS_COLLECTOR_PASSWORD. It cannot read,
#             pop or delete a batch, touch the cache (sign-in counters), the dead letters or
#             another database, nor run scripts. Collectors use
#             redis://collector:PASSWORD@HOST:6379/0.
# Passwords come from the environment or from files named by *_FILE (Compose secrets) and
# are stored in the ACL file as SHA-256 hashes. Any arguments go to redis-server.
set -eu

secret() {  # secret NAME: the value of $NAME, or of the file named by $NAME_FILE
  file=$(eval "printf '%s' \"\${$1_FILE:-}\"")
  if [ -n "$file" ]; then
    [ -r "$file" ] || { echo "start-redis: $1_FILE=$file is not readable" >&2; exit 2; }
    tr -d '\r\n' < "$file"
  else
    value=$(eval "printf '%s' \"\${$1:-}\"")
    [ -n "$value" ] || { echo "start-redis: set $1 (or $1_FILE)" >&2; exit 2; }
    printf '%s' "$value"
  fi
}

hash() { printf '%s' "$1" | sha256sum | cut -d' ' -f1; }

server_password=$(secret REDIS_PASSWORD)
collector_password=$(secret REDIS_COLLECTOR_PASSWORD)
acl=${REDIS_ACL_FILE:-/tmp/clusterui-redis-users.acl}

umask 077
cat > "$acl" <<ACL
user default on #$(hash "$server_password") ~* &* +@all
user collector on #$(hash "$collector_password") resetkeys ~ingest %R~ingest* ~_kombu.binding.ingest ~_kombu.binding_permanent.ingest resetchannels -@all +ping +hello +auth +multi +exec +discard +llen +lpush +sadd
ACL

exec redis-server --aclfile "$acl" "$@"

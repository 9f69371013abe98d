#!/bin/sh
# Write the secrets docker-compose.yml reads into deploy/secrets/ (mode 0600, never
# overwritten): the Django secret key, PostgreSQL's and Redis's passwords, the GPU nodes'
# Redis password and the demo cluster's ingest key. Run once before `docker compose up`.
set -eu
cd "$(dirname "$0")"
mkdir -p secrets
umask 077
for name in secret_key postgres_password redis_password redis_collector_password \
            demo_ingest_key; do
  if [ ! -s "secrets/$name" ]; then
    # 48 random bytes, base64: passwords may hold characters URLs reserve (/ + =); the
    # settings put them into URLs percent-encoded.
    head -c 48 /dev/urandom | base64 | tr -d '\n' > "secrets/$name"
    echo "wrote deploy/secrets/$name"
  fi
done

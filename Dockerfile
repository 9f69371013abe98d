# One image for the web server, the ingest consumer, the Celery worker and beat, and the
# demo's simulated collector (docker-compose.yml).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN useradd --create-home --uid 10001 clusterui
WORKDIR /app

# The dependencies first, from pyproject.toml alone: a change to the code reuses this layer
# instead of reinstalling every package. python-ldap (django-auth-ldap: LDAP sign-in) has
# no wheels and is compiled here against OpenLDAP's and Cyrus SASL's headers with gcc; this
# image's Python brings its own headers (/usr/local/include), so Debian's python3-dev is not
# wanted. The compiler and headers go again in the same layer; the libraries python-ldap
# loads (libldap-2.5-0, libsasl2-2) stay.
COPY pyproject.toml ./
RUN python - <<'PY' > /tmp/requirements.txt
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["server"]))
PY
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev libldap2-dev libsasl2-dev \
 && pip install --upgrade pip && pip install -r /tmp/requirements.txt \
 && apt-mark manual libldap-2.5-0 libsasl2-2 \
 && apt-get purge -y --auto-remove gcc libc6-dev libldap2-dev libsasl2-dev \
 && rm -rf /var/lib/apt/lists/* \
 && python -c "import ldap, django_auth_ldap.backend"

COPY README.md manage.py ./
COPY clusterui ./clusterui
COPY collectors ./collectors
RUN pip install --no-deps '.[server]'
COPY templates ./templates
COPY static ./static
# Static files are collected at build time and served by whitenoise (no CDN).
RUN SECRET_KEY=build-only DATABASE_URL=postgres://build@localhost/build \
    python manage.py collectstatic --no-input -v 0

# The demo simulator's state volume (docker-compose.yml, simcollector): a new named volume
# takes this directory's owner, so the unprivileged user can write its state there.
RUN install -d -o clusterui -g clusterui /var/lib/clusterui-sim
USER clusterui
EXPOSE 8000
# Each service's own check is in docker-compose.yml (python -m clusterui.healthcheck ...).
HEALTHCHECK NONE
CMD ["gunicorn", "clusterui.wsgi", "--bind", "0.0.0.0:8000", "--workers", "4", "--access-logfile", "-"]

# One image for the web server, the ingest consumer, the Celery worker and beat, and the
# demo's simulated collector (docker-compose.yml).
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN useradd --create-home --uid 10001 clusterui
WORKDIR /app

# The dependencies first, from pyproject.toml alone: a change to the code reuses this layer
# instead of reinstalling every package.
COPY pyproject.toml ./
RUN pip install --upgrade pip && python - <<'PY' > /tmp/requirements.txt && pip install -r /tmp/requirements.txt
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["server"]))
PY

COPY README.md manage.py ./
COPY clusterui ./clusterui
COPY collectors ./collectors
RUN pip install --no-deps '.[server]'
COPY templates ./templates
COPY static ./static
# Static files are collected at build time and served by whitenoise (no CDN).
RUN SECRET_KEY=build-only DATABASE_URL=postgres://build@localhost/build \
    python manage.py collectstatic --no-input -v 0

USER clusterui
EXPOSE 8000
# Each service's own check is in docker-compose.yml (python -m clusterui.healthcheck ...).
HEALTHCHECK NONE
CMD ["gunicorn", "clusterui.wsgi", "--bind", "0.0.0.0:8000", "--workers", "4", "--access-logfile", "-"]

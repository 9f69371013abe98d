# One image for the web server, the Celery worker and beat, and the simulated collector.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN useradd --create-home --uid 10001 clusterui
WORKDIR /app

COPY pyproject.toml README.md ./
COPY clusterui ./clusterui
COPY collectors ./collectors
RUN pip install --upgrade pip && pip install '.[server]'

COPY manage.py ./
COPY templates ./templates
COPY static ./static
# Static files are collected at build time and served by whitenoise (no CDN, no nginx needed).
RUN SECRET_KEY=build-only DATABASE_URL=postgres://build@localhost/build \
    python manage.py collectstatic --no-input -v 0

USER clusterui
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz').status != 200)"
CMD ["gunicorn", "clusterui.wsgi", "--bind", "0.0.0.0:8000", "--workers", "4", "--access-logfile", "-"]

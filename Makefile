# ClusterUI: the two commands are `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STACK  := $(PY) scripts/devstack.py

.PHONY: demo test bench lint venv clean dist

# The virtualenv is rebuilt when the pinned dependencies change.
# python-ldap (LDAP sign-in) is compiled: its system headers first, installed when missing.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) scripts/devstack.py ldap-build-deps
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[server,test]'
	touch $@

venv: $(VENV)/.installed

## Run the product on a simulated 16-node cluster: web UI, Celery worker and beat, simulator.
demo: venv
	$(STACK) demo

## The whole test suite against real PostgreSQL, Redis, Celery workers, SMTP, Chromium, Slurm, Prometheus, OpenLDAP and an OpenID Connect provider.
test: venv
	$(PY) -m ruff check .
	DJANGO_SETTINGS_MODULE=clusterui.settings_test $(STACK) run -- $(PY) manage.py check --fail-level WARNING
	DJANGO_SETTINGS_MODULE=clusterui.settings_test $(STACK) run -- $(PY) manage.py makemigrations --check --dry-run
	$(STACK) chromium
	$(STACK) systemd-analyze
	$(STACK) caddy
	$(STACK) prometheus
	$(STACK) slapd
	$(STACK) slurm
	$(STACK) run -- $(PY) -m pytest

## The benchmarks in benchmarks/, each printing its figures.
bench: venv
	$(STACK) run -- $(PY) benchmarks/run_all.py

## The wheels into dist/: the server (clusterui), the node collector (clusterui-collector)
## and the collector's simulator extra (clusterui-collector-sim).
dist: venv
	$(PY) scripts/dist.py --out dist

## Ruff's lint rules (pyproject.toml). Not `ruff format --check`: the code is laid out by
## hand (continuation lines aligned with their opening bracket), which ruff's black-style
## formatter would rewrite in 448 files (+17,000 lines), so the check could only fail.
lint: venv
	$(PY) -m ruff check .

clean:
	rm -rf $(VENV) var test-output staticfiles dist

# gpucloud developer commands. `make run` and `make test` work from a clean clone.
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
export PORT
# settings refuse to start without a real SECRET_KEY when DEBUG is false: this checkout's own (var/secret_key)
SECRET_KEY ?= $(shell scripts/secret-key.sh)
export SECRET_KEY

.PHONY: install ironic sushy-tools run test docs-pictures lint lint-imports schema schema-check api-schema services e2e clean console console-test terraform-provider

# The web console (frontend/): `npm ci` when the lock changes, a build when a source or the API schema changes.
CONSOLE_SOURCES := $(shell find frontend/src frontend/public -type f ! -name schema.d.ts 2>/dev/null) \
	frontend/index.html frontend/package.json frontend/package-lock.json frontend/vite.config.ts \
	$(wildcard frontend/tsconfig*.json) docs/openapi/v1.yaml

$(VENV)/.installed: requirements.lock pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON)"; exit 1; }
	scripts/system-packages.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m pip install -q --no-deps -e ./agent
	touch $@

install: $(VENV)/.installed

# OpenStack Ironic (standalone) for the bare-metal contract tests, in its own virtual environment
# (var/ironic/venv, never .venv); the tests start and stop it (scripts/ironic-standalone.sh).
ironic:
	PYTHON=$(PYTHON) scripts/ironic-env.sh

# The sushy-tools Redfish emulator (with libvirt-python) for the fencing driver's contract tests and the redfish
# test on a QEMU VM, in its own virtual environment (var/sushy-tools/venv, never .venv); the tests start and stop it.
sushy-tools:
	PYTHON=$(PYTHON) scripts/sushy-tools-env.sh

services:
	@scripts/ensure-services.sh

frontend/node_modules/.installed: frontend/package.json frontend/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "need node 20+ and npm to build the console"; exit 1; }
	cd frontend && npm ci --no-audit --no-fund
	touch $@

frontend/dist/index.html: frontend/node_modules/.installed $(CONSOLE_SOURCES)
	cd frontend && npm run build
	touch $@

console: frontend/dist/index.html

console-test: frontend/node_modules/.installed
	cd frontend && npm test

run: install services console
	@scripts/run.sh

test: install services ironic sushy-tools
	$(PY) -m pytest -n 2 -q

e2e: install services terraform-provider console
	$(PY) -m pytest -m e2e -q

# The Terraform provider in its own virtual environment (terraform/.venv), a filesystem mirror (terraform/mirror/)
# and the CLI config file that installs it from there (terraform/gpucloud.tfrc); prints how to use it.
terraform-provider:
	PYTHON=$(PYTHON) terraform/build.sh

# The pictures of an invoice and its credit note in docs/billing/ (docs/billing.md shows them): rendered by the
# billing test that checks both documents, which otherwise writes them into its temporary directory only.
docs-pictures: install services
	UPDATE_DOCS_PICTURES=1 $(PY) -m pytest tests/billing/test_api.py -q -p no:randomly \
	  -k test_credit_note_exports_and_invoice_pdf_parties_dates_and_credits

lint: install
	$(VENV)/bin/ruff check .

lint-imports: install
	$(VENV)/bin/lint-imports --no-cache

schema: install
	$(PY) manage.py spectacular --file docs/openapi/v1.yaml --validate

schema-check: install
	@scripts/schema-check.sh

# Schemathesis against the committed schema, in process, as a tenant and as staff (bounded: a few minutes).
api-schema: install services
	SCHEMATHESIS_MAX_EXAMPLES=$${SCHEMATHESIS_MAX_EXAMPLES:-2} $(PY) -m pytest -m api_schema -q

clean:
	rm -rf $(VENV) var terraform/.venv terraform/mirror terraform/gpucloud.tfrc frontend/node_modules frontend/dist

# The newcomer's commands: `make demo-mcp` and `make test`. Everything installs itself into .venv.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

TS_CLIENT := tests/e2e/ts
TS_STAMP := $(TS_CLIENT)/node_modules/.installed
NPM_SERVERS := tests/e2e/npm_servers
NPM_SERVERS_STAMP := $(NPM_SERVERS)/node_modules/.installed
CLIENTS := tests/e2e/clients
CLIENTS_STAMP := $(CLIENTS)/.venv/.installed
INSPECTOR := tests/e2e/inspector
INSPECTOR_STAMP := $(INSPECTOR)/node_modules/.installed
AXE := tests/web/axe
AXE_STAMP := $(AXE)/node_modules/.installed

.PHONY: install postgresql ts-client npm-servers clients inspector axe test test-flaky lint typecheck pytest chromium demo-mcp demo-gated demo-undo demo-passkey demo bench scale-out soak soak-processes fuzz mutation schemas vectors violations clean

install: $(STAMP)

# The official TypeScript MCP SDK, pinned by its lockfile, for tests/e2e/test_typescript_client.py. Node comes
# from the system; where it is missing, Debian's (apt-get, as root on a fresh CI machine).
ts-client: $(TS_STAMP)

$(TS_STAMP): $(TS_CLIENT)/package.json $(TS_CLIENT)/package-lock.json
	command -v npm >/dev/null || { echo "make ts-client: installing node and npm (apt-get install -y nodejs npm)" >&2; \
		apt-get update -q && apt-get install -y -q nodejs npm; }
	cd $(TS_CLIENT) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Third-party MCP servers (server-memory, server-filesystem, server-everything), pinned by their lockfile, that
# tests/e2e/test_proxy_npm_servers.py runs behind the proxy.
npm-servers: $(NPM_SERVERS_STAMP)

$(NPM_SERVERS_STAMP): $(NPM_SERVERS)/package.json $(NPM_SERVERS)/package-lock.json
	command -v npm >/dev/null || { echo "make npm-servers: installing node and npm (apt-get install -y nodejs npm)" >&2; \
		apt-get update -q && apt-get install -y -q nodejs npm; }
	cd $(NPM_SERVERS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Python MCP clients nobody here wrote (fastmcp's Client, PydanticAI's MCPToolset), exactly pinned, in a venv of
# their own as a user's would be: tests/e2e/test_third_party_clients.py runs its scripts there as subprocesses.
clients: $(CLIENTS_STAMP)

$(CLIENTS_STAMP): $(CLIENTS)/requirements.txt
	rm -rf $(CLIENTS)/.venv
	$(PY) -m venv $(CLIENTS)/.venv
	$(CLIENTS)/.venv/bin/pip install -q --upgrade pip 2>/dev/null || true
	$(CLIENTS)/.venv/bin/pip install -q -r $(CLIENTS)/requirements.txt
	$(CLIENTS)/.venv/bin/pip check
	touch $@

# The MCP Inspector's CLI, pinned by its lockfile: a per-call client nobody here wrote, that
# tests/e2e/test_service_processes.py runs through `hatp connect`.
inspector: $(INSPECTOR_STAMP)

$(INSPECTOR_STAMP): $(INSPECTOR)/package.json $(INSPECTOR)/package-lock.json
	command -v npm >/dev/null || { echo "make inspector: installing node and npm (apt-get install -y nodejs npm)" >&2; \
		apt-get update -q && apt-get install -y -q nodejs npm; }
	cd $(INSPECTOR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# axe-core, pinned by its lockfile, that tests/web/test_inbox_a11y.py injects into the inbox's pages in Chromium.
axe: $(AXE_STAMP)

$(AXE_STAMP): $(AXE)/package.json $(AXE)/package-lock.json
	command -v npm >/dev/null || { echo "make axe: installing node and npm (apt-get install -y nodejs npm)" >&2; \
		apt-get update -q && apt-get install -y -q nodejs npm; }
	cd $(AXE) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The modules setup.py compiles with mypyc, as its COMPILED lists them (the saga reader and rules, canonical JSON; a
# test holds the two lists equal): an edit to one builds them again, else the old build would run
COMPILED := hatp_mcp/core/validate/saga_view.py hatp_mcp/core/validate/saga_rules.py hatp_mcp/core/signing/canonical.py

$(STAMP): pyproject.toml setup.py $(COMPILED)
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip 2>/dev/null || true
	$(BIN)/pip install -q -e '.[dev,pydantic-ai,openai-agents,langgraph]'
	touch $(STAMP)

lint: install
	$(BIN)/ruff check hatp_mcp servers demo tests bench setup.py
	$(BIN)/ruff format --check hatp_mcp servers demo tests bench setup.py
	$(BIN)/lint-imports --no-cache

typecheck: install
	$(BIN)/mypy

# The store tests start a throwaway PostgreSQL of their own (tests/postgres_cluster.py): its server binaries must be
# here. Debian's package puts them in /usr/lib/postgresql/N/bin and starts no cluster; CI runs as root.
PG_INITDB := $(firstword $(wildcard /usr/lib/postgresql/*/bin/initdb) $(shell command -v initdb 2>/dev/null))
postgresql:
ifeq ($(PG_INITDB),)
	@if [ "$$(id -u)" != 0 ]; then echo "PostgreSQL's initdb is missing: run 'sudo apt-get install -y postgresql'" >&2; exit 1; fi
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql
endif

# The web inbox's browser tests drive Debian's chromium (Playwright, never `playwright install`).
chromium:
	test -x /usr/bin/chromium || { (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) \
	  || (sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium); }

# pytest exit 5 means "no tests ran": that is a failure here, never a pass.
pytest: install postgresql ts-client npm-servers clients inspector axe chromium
	$(BIN)/python -m pytest; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$rc

test: lint typecheck pytest

# Tests marked known_flaky (left out of make test until their flake is found), ten times each
test-flaky: install postgresql
	for i in 1 2 3 4 5 6 7 8 9 10; do $(BIN)/python -m pytest -m known_flaky; rc=$$?; \
		if [ $$rc -eq 5 ]; then echo "no test is marked known_flaky"; exit 0; fi; [ $$rc -eq 0 ] || exit 1; done

demo-mcp: install
	$(BIN)/python -m demo.trip

demo-gated: install
	$(BIN)/python -m demo.gated

demo-undo: install
	$(BIN)/python -m demo.undo

demo-passkey: install chromium
	$(BIN)/python -m demo.passkey $(if $(OPEN),--open)

bench: install postgresql
	$(BIN)/python -m bench.run

# 200 concurrent trips over two and three coordinator processes on one PostgreSQL (make test runs 40)
scale-out: install postgresql
	HATP_TRIPS=200 $(BIN)/python -m pytest tests/e2e/test_coordinators_share_one_log.py

# 10,000 trips in process under injected faults and coordinator crashes; prints counts per fault and outcome
soak: install
	$(BIN)/python -m tests.soak.soak --n 10000

# the same over real processes: 500 trips, 20 SIGKILLs of the coordinator or a tool server, each started again
soak-processes: install
	$(BIN)/python -m tests.soak.processes --n 500 --kills 20

# 100,000 hostile inputs per parser and boundary (about an hour here); prints inputs, refusals, accepted, crashes
fuzz: install
	$(BIN)/python -m tests.fuzz.run --examples 100000

# Every rule's check switched off by its rule id, one at a time; its planted violations must notice (spec/mutation.md)
mutation: install
	$(BIN)/python -m tests.mutation.run --write

schemas: install
	$(BIN)/hatp schemas --write spec/schemas

vectors: install
	$(BIN)/hatp vectors --write spec/vectors

violations: install
	$(BIN)/python -m tests.violations_appendix --write

clean:
	rm -rf $(VENV) $(TS_CLIENT)/node_modules $(NPM_SERVERS)/node_modules $(CLIENTS)/.venv build
	find hatp_mcp -name '*.so' -delete

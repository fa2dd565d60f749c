"""Where the prompt cache keeps its files: the user cache folder (platformdirs) unless configured,
never the folder the app was started from; and emptying it through the Engine."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs
import pytest

from engine.cache import DEFAULT_DISK_BYTES, DEFAULT_RAM_BYTES, PromptCacheSettings
from engine.cache.settings import DIR_ENV, DIR_NAME
from engine.config import EngineConfig
from engine.default_model import CACHE_ENV
from tests.engine.engine_harness import P_A, P_B, collect, wait_until, with_engine


@pytest.fixture
def fresh_user(tmp_path, monkeypatch):
    """An empty working folder, and HOME and the XDG folders somewhere else, with no Tandem
    override set: as a fresh desktop session starting the app from any folder."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    for name, sub in (("XDG_CACHE_HOME", ".cache"), ("XDG_DATA_HOME", ".local/share")):
        monkeypatch.setenv(name, str(home / sub))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv(DIR_ENV, raising=False)
    monkeypatch.delenv(CACHE_ENV, raising=False)
    return work, home


def all_files(folder: Path) -> list[Path]:
    return sorted(Path(d) / n for d, _, names in os.walk(folder) for n in names)


def test_engine_writes_its_cache_under_the_user_cache_folder(tiny, fresh_user):
    work, home = fresh_user
    expected = Path(platformdirs.user_cache_dir("tandem")) / DIR_NAME
    assert home in expected.parents

    async def body(eng):
        for prompt in (P_A, P_B):
            out = await collect(eng, request(prompt))
            assert out.finished.token_ids == tiny.greedy(prompt, 6)
        assert await wait_until(lambda: eng.stats().cache.ram_entries == 2)

    with_engine(tiny.path, body)  # stopping the engine finishes its writes
    assert all_files(work) == []
    written = all_files(home)
    assert len(written) == 2
    assert all(expected in f.parents and f.suffix == ".safetensors" for f in written)


def request(prompt):
    from engine.requests import GenerationRequest

    return GenerationRequest(prompt_tokens=prompt, max_tokens=6)


def test_settings_defaults_and_overrides(fresh_user, monkeypatch, tmp_path):
    default = PromptCacheSettings.of(EngineConfig())
    assert default.disk_dir == Path(platformdirs.user_cache_dir("tandem")) / DIR_NAME
    assert (default.ram_bytes, default.disk_bytes) == (DEFAULT_RAM_BYTES, DEFAULT_DISK_BYTES)

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "tandem-cache"))  # Tandem's own cache root
    assert PromptCacheSettings.of(EngineConfig()).disk_dir == tmp_path / "tandem-cache" / DIR_NAME
    monkeypatch.setenv(DIR_ENV, str(tmp_path / "env"))
    assert PromptCacheSettings.of(EngineConfig()).disk_dir == tmp_path / "env"
    configured = EngineConfig(prompt_cache_dir=str(tmp_path / "mine"), prompt_cache_ram_bytes=5)
    s = PromptCacheSettings.of(configured)
    assert (s.disk_dir, s.ram_bytes) == (tmp_path / "mine", 5)
    assert PromptCacheSettings.of(EngineConfig(prompt_cache_disk_bytes=0)).disk_dir is None


def test_engine_clears_the_prompt_cache_and_says_how_much_it_freed(tiny, tmp_path):
    folder = tmp_path / "prompt-cache"

    async def body(eng):
        for prompt in (P_A, P_B):
            await collect(eng, request(prompt))
        assert await wait_until(lambda: eng.stats().cache.ram_entries == 2)  # both published
        await eng.run_on_engine_thread(lambda: eng._worker.factory.prompt_cache.flush())
        on_disk = sum(f.stat().st_size for f in all_files(folder))
        assert await wait_until(lambda: eng.stats().cache.disk_bytes == on_disk > 0)
        ram = eng.stats().cache.ram_bytes
        freed = await eng.clear_prompt_cache()
        assert freed == ram + on_disk and all_files(folder) == []
        again = await collect(eng, request(P_A))  # a miss now, and the same reply
        assert again.finished.stats.cached_tokens == 0
        assert again.finished.token_ids == tiny.greedy(P_A, 6)

    with_engine(tiny.path, body, prompt_cache_dir=str(folder))

"""The remote backend against real servers: mlx_lm.server and our own `tandem serve` on a tiny
random model (temperature 0: the reply equals mlx_lm.generate's), and servers that are down,
refuse the key, hang or drop the stream (a clear message, the partial reply kept)."""

from __future__ import annotations

import pytest
from apphelpers import run
from mlx_lm import load as mlx_load
from remote_support import MlxLmServer, free_port, misbehaving_server, use_memory_keyring

from app.remote.remote_backend import RemoteBackend, RemoteError
from app.remote.remote_spec import remote_spec
from app.remote.server_registry import KEYRING_SERVICE, ServerRegistry
from engine.requests import (
    ErrorEvent,
    FinishedEvent,
    FinishReason,
    GenerationRequest,
    SamplingParams,
    StatsEvent,
    TokenEvent,
)
from tests.server.server_harness import Reference, ServerThread
from tests.tiny_models import make_tiny_llama_dir

MESSAGES = [{"role": "user", "content": "Name three colours, please."}]
MAX_TOKENS = 20
KEY = "sk-remote-test"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = make_tiny_llama_dir(tmp_path_factory.mktemp("remote-model"), tie_word_embeddings=False)
    model, tokenizer = mlx_load(str(path))
    return path, Reference(model, tokenizer)


@pytest.fixture
def keys():
    return use_memory_keyring()


def request_for(server_id: str, model: str, **fields) -> GenerationRequest:
    return GenerationRequest(
        messages=MESSAGES,
        max_tokens=MAX_TOKENS,
        sampling=SamplingParams(temperature=0.0),
        model=remote_spec(server_id, model),
        **fields,
    )


async def collect(backend: RemoteBackend, request: GenerationRequest):
    pieces, stats, end = [], [], None
    async for event in backend.submit(request):
        assert end is None
        if isinstance(event, TokenEvent):
            pieces.append(event.text)
        elif isinstance(event, StatsEvent):
            stats.append(event.stats)
        else:
            end = event
    return "".join(pieces), stats, end


def test_chat_on_mlx_lm_server(tiny, store, keys):
    path, reference = tiny
    server = MlxLmServer(path)
    backend = RemoteBackend(ServerRegistry(store))
    try:
        added = backend.registry.add(server.url, name="mlx-lm box")
        models = run(backend.list_models(added))
        model = str(path.resolve())
        assert model in models
        text, _, end = run(collect(backend, request_for(added.id, model)))
        assert isinstance(end, FinishedEvent), end
        expected, count = reference.chat(MESSAGES, MAX_TOKENS)
        assert text == end.text == expected
        assert end.stats.generated_tokens == count
        assert end.stats.ttft_s is not None and end.stats.ttft_s > 0
        assert end.stats.decode_tokens_per_s > 0
    finally:
        run(backend.close())
        server.close()


def test_chat_on_tandem_serve_with_a_key_from_the_keyring(tiny, store, keys):
    path, reference = tiny
    harness = ServerThread(path)
    served = harness.serve(api_key=KEY)
    backend = RemoteBackend(ServerRegistry(store))
    try:
        added = backend.registry.add(served.url, name="Tandem box", api_key=KEY)
        assert keys.passwords[(KEYRING_SERVICE, added.id)] == KEY
        assert KEY not in str(store.setting("remote_servers"))  # not in SQLite
        assert run(backend.list_models(added))[0] == path.name  # then the models on disk
        text, _, end = run(collect(backend, request_for(added.id, path.name)))
        assert isinstance(end, FinishedEvent), end
        expected, count = reference.chat(MESSAGES, MAX_TOKENS)
        assert text == expected and end.stats.generated_tokens == count
        assert end.stats.prompt_tokens > 0  # from the server's usage

        backend.registry.set_key(added, "wrong")
        with pytest.raises(RemoteError, match="refused the API key"):
            run(backend.list_models(added))
        _, _, end = run(collect(backend, request_for(added.id, path.name)))
        assert isinstance(end, ErrorEvent) and "refused the API key (HTTP 401)" in end.message
    finally:
        run(backend.close())
        harness.close(served)


def test_an_unreachable_server_says_so(store, keys):
    backend = RemoteBackend(ServerRegistry(store))
    added = backend.registry.add(f"127.0.0.1:{free_port()}", name="nobody")
    try:
        assert added.url.startswith("http://") and added.url.endswith("/v1")
        with pytest.raises(RemoteError, match="Cannot reach nobody"):
            run(backend.list_models(added))
        _, _, end = run(collect(backend, request_for(added.id, "m")))
        assert isinstance(end, ErrorEvent) and "Is the server running?" in end.message
    finally:
        run(backend.close())


def test_a_hanging_server_times_out(store, keys):
    runner, url = run(misbehaving_server("hang"))
    backend = RemoteBackend(ServerRegistry(store), read_timeout_s=0.5)
    try:
        added = backend.registry.add(url, name="slow box")
        _, _, end = run(collect(backend, request_for(added.id, "m")))
        assert isinstance(end, ErrorEvent)
        assert "slow box stopped answering: nothing came for 0.5 s" in end.message
    finally:
        run(backend.close())
        run(runner.cleanup())


def test_a_dropped_stream_keeps_the_partial_reply(store, keys):
    runner, url = run(misbehaving_server("drop"))
    backend = RemoteBackend(ServerRegistry(store))
    try:
        added = backend.registry.add(url, name="flaky box")
        text, _, end = run(collect(backend, request_for(added.id, "m")))
        assert text == "Hello there"
        assert isinstance(end, ErrorEvent)
        assert "connection to flaky box dropped before the reply ended" in end.message
    finally:
        run(backend.close())
        run(runner.cleanup())


def test_continuing_a_reply_is_refused_clearly(store, keys):
    backend = RemoteBackend(ServerRegistry(store))
    added = backend.registry.add("http://127.0.0.1:9/v1", name="box")
    _, _, end = run(collect(backend, request_for(added.id, "m", continue_reply=True)))
    assert isinstance(end, ErrorEvent) and "cannot continue" in end.message
    assert FinishReason.STOP  # (the enum the backend maps finish reasons to)

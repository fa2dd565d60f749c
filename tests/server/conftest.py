"""One tiny model, engine and server for every server test (a module's worth of requests costs
less than starting them again)."""

from __future__ import annotations

import pytest
from mlx_lm import load as mlx_load

from tests.server.server_harness import Reference, ServerThread
from tests.tiny_models import make_tiny_llama_dir

API_KEY = "sk-test-key"
SMALL_BODY_BYTES = 2048


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    return make_tiny_llama_dir(tmp_path_factory.mktemp("server-model"), tie_word_embeddings=False)


@pytest.fixture(scope="session")
def reference(tiny_dir) -> Reference:
    model, tokenizer = mlx_load(str(tiny_dir))
    return Reference(model, tokenizer)


@pytest.fixture(scope="session")
def served(tiny_dir):
    """(harness, open server, server with an API key and a small body limit)."""
    harness = ServerThread(tiny_dir)
    open_server = harness.serve()
    guarded = harness.serve(api_key=API_KEY, max_body_bytes=SMALL_BODY_BYTES)
    yield harness, open_server, guarded
    harness.close(open_server, guarded)

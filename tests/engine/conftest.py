"""Fixtures shared by the engine behaviour tests."""

import pytest

from tests.engine.engine_harness import TinyModel, make_tiny


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> TinyModel:
    """A tiny random llama (untied embeddings) and its mlx_lm.generate greedy replies."""
    return make_tiny(tmp_path_factory.mktemp("target"))

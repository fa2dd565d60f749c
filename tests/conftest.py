"""Shared test set-up: OpenBLAS must be interposed before anything imports mlx.core, and the
prompt cache's disk tier goes to a throwaway folder, never the user's."""

import os
import tempfile

import engine  # noqa: F401

os.environ.setdefault("TANDEM_PROMPT_CACHE_DIR", tempfile.mkdtemp(prefix="tandem-prompt-cache-"))

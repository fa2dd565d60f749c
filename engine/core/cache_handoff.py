"""What the running batch hands to the prompt cache (a leaving row's caches, and a prompt whose
cache cannot be trimmed at the moment it joins) and asks of it (a new request's cached prefix).
Caching is best effort: a failure is logged and never fails the request."""

from __future__ import annotations

import logging
from typing import Any

from mlx_lm.models.cache import can_trim_prompt_cache

from engine.core.batch import DecodeBatch
from engine.core.drafter_inputs import DrafterInputs
from engine.core.request_state import RequestState

log = logging.getLogger(__name__)


def restore_prefix(reuse: Any, state: RequestState, *, wait: bool) -> Any:
    """The prompt cache's match for a new request's prompt (engine.cache.reuse.PromptReuse):
    None when there is none or the lookup failed, LOADING while it is read from disk."""
    try:
        return reuse.restore(state.prompt, wait=wait)
    except Exception:  # noqa: BLE001 - a cache failure never fails the request
        log.exception("prompt cache lookup failed for %s", state.request_id)
        return None


def publish_row(
    reuse: Any | None, batch: DecodeBatch, inputs: DrafterInputs, state: RequestState
) -> None:
    """Store a leaving row's caches under the tokens they hold (its reply's EOS included
    when it was fed)."""
    if reuse is None:
        return
    fed = state.prompt + state.generated
    if state.eos_token is not None:
        fed.append(state.eos_token)
    try:
        held = batch.lengths[batch.index(state)]
        draft = inputs.export(state, held)
        want = min(held, len(fed), *([draft[0].offset] if draft is not None else []))
        # a row that finished inside its draft holds positions past its reply, and a
        # drafter cache may lack the last pair (the token after is not known yet): store
        # what both hold, recurrent state recomputed (engine/core/batch.py, extract_at)
        target = batch.extract_at(state, want) if want < held else None
        if target is not None:
            fed, held = fed[:want], want
        else:
            target = batch.extract(state)
            if draft is not None and draft[0].offset < held:
                if can_trim_prompt_cache(target):
                    fed = fed[: draft[0].offset]
                else:  # recurrent state past the drafter's last pair: the target alone
                    draft = None
                    reuse.cache.count_skip("draft-mismatch")
        reuse.publish(fed, target, held=held, draft=draft)
    except Exception:  # noqa: BLE001 - caching is best effort
        log.exception("could not store the prompt cache of %s", state.request_id)


def publish_prompt(reuse: Any | None, state: RequestState, row_cache: list[Any]) -> None:
    """A cache that cannot be trimmed (recurrent state, a wrapped sliding window) can later
    serve only prompts it is a whole prefix of: store it at the prompt's end too, so that
    regenerating or editing this reply starts warm."""
    if reuse is None or can_trim_prompt_cache(row_cache):
        return
    held = len(state.prompt) - 1
    try:
        reuse.publish(state.prompt[:held], row_cache, held=held)
    except Exception:  # noqa: BLE001 - caching is best effort
        log.exception("could not store the prompt of %s", state.request_id)

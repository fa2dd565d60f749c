"""What other threads ask of the MLX thread (engine/worker.py): one dataclass per command on
its queue; a command with `done` is answered through it (a result, or the error)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.requests import GenerationRequest

Done = Callable[[Any, BaseException | None], None]


@dataclass
class Submit:
    """A request to run (or to wait for its model's load)."""

    request: GenerationRequest


@dataclass
class Cancel:
    """End a request: waiting, queued or running."""

    request_id: str


@dataclass
class Load:
    """Load a model by hand (or the configured ones at start)."""

    model: str | None
    done: Done
    pin: bool = False
    configured: bool = False  # the engine's configured model: its status, its core made now
    configured_draft: bool = False  # check that it can draft for the configured model


@dataclass
class SetDefault:
    """What requests that name no model use from now on."""

    model: str | None
    done: Done


@dataclass
class Unload:
    """Unload a model that no request uses, freeing its memory."""

    model: str | None
    done: Done


@dataclass
class Pin:
    """Keep a loaded model from being unloaded to make room (or let it be)."""

    model: str | None
    pinned: bool
    done: Done


@dataclass
class CountTokens:
    """Prompt tokens of messages with a model's chat template."""

    messages: list[dict[str, str]]
    continue_reply: bool
    model: str | None
    done: Done


@dataclass
class Stop:
    """End the thread: requests end, pending disk writes finish."""

    pass


@dataclass
class Call:
    """Run a function on the MLX thread (tests, tools); its result goes to `done`."""

    fn: Callable[[], Any]
    done: Done

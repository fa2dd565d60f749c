"""The app-wide defaults a new chat starts with: generation settings and a system prompt, kept
in the store's settings table."""

from __future__ import annotations

from dataclasses import dataclass

from app.settings.chat_settings import ChatSettings
from app.store.conversation_store import Store

DEFAULT_SYSTEM_PROMPT_KEY = "default_system_prompt"


@dataclass(frozen=True)
class NewChatDefaults:
    """What a new chat starts with."""

    settings: ChatSettings
    system_prompt: str = ""


def load_defaults(store: Store) -> NewChatDefaults:
    prompt = store.setting(DEFAULT_SYSTEM_PROMPT_KEY, "")
    return NewChatDefaults(
        settings=store.default_chat_settings(),
        system_prompt=prompt if isinstance(prompt, str) else "",
    )


def save_default_system_prompt(store: Store, text: str) -> None:
    store.set_setting(DEFAULT_SYSTEM_PROMPT_KEY, text.strip())

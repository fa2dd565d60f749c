"""The app's plain data: conversations and messages as they live in the store and the models."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

from app.settings.chat_settings import ChatSettings

DEFAULT_TITLE = "New chat"


class Role(str, enum.Enum):
    USER = "user"
    ASSISTANT = "assistant"


class MessageStatus(str, enum.Enum):
    DONE = "done"
    GENERATING = "generating"  # a reply being written; left over after a crash
    INTERRUPTED = "interrupted"  # the app died while this reply was being written
    STOPPED = "stopped"  # the user stopped it
    ERROR = "error"

    @property
    def terminal(self) -> bool:
        return self is not MessageStatus.GENERATING


@dataclass
class Message:
    role: Role
    content: str
    status: MessageStatus = MessageStatus.DONE
    id: int | None = None
    conversation_id: int | None = None
    draft_spans: list[tuple[int, int]] = field(default_factory=list)  # [start, end) in content
    stats: dict | None = None  # a summary of the reply's RequestStats, for display
    error: str | None = None
    created: float = field(default_factory=time.time)


@dataclass
class Conversation:
    id: int | None = None
    title: str = DEFAULT_TITLE
    system_prompt: str = ""
    settings: ChatSettings = field(default_factory=ChatSettings)
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    is_open: bool = True  # shown as a tab
    tab_index: int = 0


@dataclass(frozen=True)
class ConversationSummary:
    """One row of the saved-conversations list."""

    id: int
    title: str
    updated: float
    message_count: int
    snippet: str = ""  # the matched text when searching
    is_open: bool = False

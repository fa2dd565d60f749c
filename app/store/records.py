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
    QUEUED = "queued"  # typed while a reply ran; sent when it ends (never stored as a message)

    @property
    def terminal(self) -> bool:
        return self not in (MessageStatus.GENERATING, MessageStatus.QUEUED)


@dataclass
class Message:
    """One message of a conversation's tree (a node: its parent is the message it answers)."""

    role: Role
    content: str
    status: MessageStatus = MessageStatus.DONE
    id: int | None = None
    conversation_id: int | None = None
    parent_id: int | None = None  # None: a first message
    siblings: tuple[int, ...] = ()  # ids of every version at this place, this one included
    draft_spans: list[tuple[int, int]] = field(default_factory=list)  # [start, end) in content
    stats: dict | None = None  # app.store.reply_stats.encode(RequestStats): summary + full stats
    error: str | None = None
    created: float = field(default_factory=time.time)

    @property
    def version(self) -> tuple[int, int]:
        """(1-based index among its versions, number of versions); (1, 1) without siblings."""
        if self.id is None or self.id not in self.siblings:
            return 1, 1
        return self.siblings.index(self.id) + 1, len(self.siblings)

    @property
    def continuable(self) -> bool:
        """A reply with text that ended early: cut at max tokens, stopped or interrupted."""
        early = self.cut_at_max_tokens or self.status in (
            MessageStatus.STOPPED,
            MessageStatus.INTERRUPTED,
        )
        return self.role is Role.ASSISTANT and bool(self.content) and early

    @property
    def cut_at_max_tokens(self) -> bool:
        """A finished reply that stopped because it reached its token limit."""
        return (
            self.role is Role.ASSISTANT
            and self.status is MessageStatus.DONE
            and bool(self.stats)
            and self.stats.get("finish_reason") == "length"
        )


@dataclass
class Conversation:
    """A chat: its title, settings and which branch of its message tree is on screen."""

    id: int | None = None
    title: str = DEFAULT_TITLE
    system_prompt: str = ""
    settings: ChatSettings = field(default_factory=ChatSettings)
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    is_open: bool = True  # shown as a tab
    tab_index: int = 0
    pinned: bool = False
    current_leaf: int | None = None  # the last message of the branch on screen
    queue: list[str] = field(default_factory=list)  # messages waiting for the running reply


@dataclass(frozen=True)
class ConversationSummary:
    """One row of the saved-conversations list."""

    id: int
    title: str
    updated: float
    message_count: int
    snippet: str = ""  # the matched text when searching
    snippet_marks: tuple[tuple[int, int], ...] = ()  # [start, end) of the matched words
    is_open: bool = False
    pinned: bool = False
    first_line: str = ""  # the first message's first line (titles are shortened)
    hit_message_id: int | None = None  # the message the snippet comes from

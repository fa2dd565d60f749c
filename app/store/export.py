"""Conversations as Markdown documents: one chat to a file, or every chat into a folder."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

from app.store.records import Conversation, Message, MessageStatus, Role

if TYPE_CHECKING:
    from app.store.conversation_store import Store

ROLE_HEADINGS = {Role.USER: "You", Role.ASSISTANT: "Tandem"}
FILE_NAME_CHARS = 80
ALL_CHATS_FOLDER = "Tandem chats {date}"


def to_markdown(conversation: Conversation, messages: list[Message]) -> str:
    lines = [f"# {conversation.title}", ""]
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(conversation.created))
    lines += [f"*Exported from Tandem · started {stamp}*", ""]
    if conversation.system_prompt.strip():
        lines += ["> **System prompt:** " + conversation.system_prompt.strip(), ""]
    for message in messages:
        heading = f"## {ROLE_HEADINGS[message.role]}"
        if message.status in (MessageStatus.INTERRUPTED, MessageStatus.STOPPED):
            heading += f" *({message.status.value})*"
        elif message.status is MessageStatus.ERROR:
            heading += " *(error)*"
        elif message.cut_at_max_tokens:
            heading += " *(cut at max tokens)*"
        lines += [heading, "", message.content.rstrip(), ""]
        if message.error:
            lines += [f"> Error: {message.error}", ""]
    return "\n".join(lines).rstrip() + "\n"


def documents_dir() -> Path:
    """Where export dialogs open: the user's documents folder (home if there is none)."""
    folder = Path(platformdirs.user_documents_dir())
    return folder if folder.is_dir() else Path.home()


def file_name(title: str) -> str:
    """A file name for a chat titled `title` (no path separators or odd characters)."""
    name = "".join(c if c.isalnum() or c in " -_" else "_" for c in title).strip(" _")
    return (name[:FILE_NAME_CHARS].rstrip() or "chat") + ".md"


def export_chat(store: Store, conversation_id: int, path: str | Path) -> Path:
    """Write the branch on screen of one chat to `path`."""
    path = Path(path)
    conversation = store.conversation(conversation_id)
    path.write_text(to_markdown(conversation, store.messages(conversation_id)), encoding="utf-8")
    return path


def export_all(store: Store, folder: str | Path) -> list[Path]:
    """Write every chat that has a message into a new dated folder inside `folder`; return the
    files written."""
    target = Path(folder) / ALL_CHATS_FOLDER.format(date=time.strftime("%Y-%m-%d"))
    n = 1
    while target.exists():
        n += 1
        target = Path(folder) / (ALL_CHATS_FOLDER.format(date=time.strftime("%Y-%m-%d")) + f" {n}")
    target.mkdir(parents=True)
    written: list[Path] = []
    for summary in store.list_conversations(limit=1_000_000):
        path = target / file_name(summary.title)
        k = 1
        while path.exists():
            k += 1
            path = target / file_name(f"{summary.title} {k}")
        written.append(export_chat(store, summary.id, path))
    return written

"""A conversation as a Markdown document."""

from __future__ import annotations

import time

from app.store.records import Conversation, Message, MessageStatus, Role

ROLE_HEADINGS = {Role.USER: "You", Role.ASSISTANT: "Tandem"}


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
        lines += [heading, "", message.content.rstrip(), ""]
        if message.error:
            lines += [f"> Error: {message.error}", ""]
    return "\n".join(lines).rstrip() + "\n"

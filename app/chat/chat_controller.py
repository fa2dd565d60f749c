"""One chat's logic: sending (or queueing), replies and their continuation, versions of messages
(edit and regenerate add a branch, nothing is thrown away), deleting one message with undo,
forking, and the chat's context use.

The parts live in their own files: `reply_stream` writes one reply (stored before shown),
`prompt_queue` holds what was typed meanwhile, `context_budget` counts tokens, and
`message_deletion` is the undoable delete. This class joins them and owns the message model.
"""

from __future__ import annotations

import time
from collections import deque

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QUndoStack

from app.chat.context_budget import ContextBudget
from app.chat.message_deletion import DeleteMessage
from app.chat.message_model import MessageListModel
from app.chat.prompt_queue import PromptQueue
from app.chat.reply_stream import DEFAULT_PERSIST_INTERVAL_S, ReplyStream
from app.chat.titles import first_line, title_from
from app.engine_bridge import EngineBridge
from app.settings.chat_settings import ChatSettings
from app.store.conversation_store import Store
from app.store.records import DEFAULT_TITLE, Conversation, Message, MessageStatus, Role
from engine.requests import FinishReason, GenerationRequest, RequestStats

DEFAULT_RATE_HISTORY = 120


class ChatController(QObject):
    """The controller of one chat tab: its model, its replies, its history."""

    # No bool payload: PySide6 6.12 loses a reference to True on every Python emit of True.
    busyChanged = Signal()  # read `busy`
    replyStats = Signal(object)  # RequestStats of the running (or last) reply
    modelLoading = Signal(str)  # what the reply waits for while its model loads; "" once not
    replyFinished = Signal(str)  # "stop", "length", "cancelled" or "error"
    errorOccurred = Signal(str)
    titleChanged = Signal(str)
    settingsChanged = Signal(object)  # ChatSettings
    forked = Signal(object)  # the new Conversation made by "New chat from here"
    historyChanged = Signal()  # another branch is on screen, or a message was deleted or restored
    closed = Signal()

    def __init__(
        self,
        conversation: Conversation,
        *,
        store: Store,
        bridge: EngineBridge,
        persist_interval_s: float = DEFAULT_PERSIST_INTERVAL_S,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.conversation = conversation
        self._store = store
        self._bridge = bridge
        self._persist_interval = persist_interval_s
        self.model = MessageListModel(self)
        self.model.set_messages(store.messages(conversation.id))
        self.queue = PromptQueue(conversation, store=store, model=self.model, parent=self)
        self.queue.restore()
        self.budget = ContextBudget(
            bridge, self.request_messages, model=lambda: self.settings.model, parent=self
        )
        self.undo_stack = QUndoStack(self)
        self.last_stats: RequestStats | None = store.last_reply_stats(conversation.id)
        if self.last_stats is not None:
            self.budget.set_used(self.last_stats.context_tokens)
        self.rate_history: deque[tuple[float, float]] = deque(maxlen=DEFAULT_RATE_HISTORY)
        self._stream: ReplyStream | None = None
        self.budget.refresh()

    # -- state ---------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._stream is not None

    @property
    def settings(self) -> ChatSettings:
        return self.conversation.settings

    @property
    def model_name(self) -> str:
        """The model this chat runs on (its setting, or the engine's default model)."""
        return self._bridge.name_for(self.settings.model)

    @property
    def request_id(self) -> str | None:
        return self._stream.request.request_id if self._stream else None

    @property
    def first_line(self) -> str:
        """The first message's first line (the title is a shortened form): for tooltips."""
        sent = self.model.sent()
        return first_line(sent[0].content) if sent else self.conversation.title

    def set_settings(self, settings: ChatSettings) -> None:
        """Applies to the next reply (its model and draft too: other chats are not touched);
        the panel shows it at once (settingsChanged)."""
        previous = self.conversation.settings
        self.conversation.settings = settings.normalized()
        self._store.save_conversation(self.conversation)
        self.settingsChanged.emit(self.conversation.settings)
        if self.conversation.settings.model != previous.model:
            self.budget.refresh()  # another tokenizer and context length

    def set_system_prompt(self, text: str) -> None:
        if text != self.conversation.system_prompt:
            self.conversation.system_prompt = text
            self._store.save_conversation(self.conversation)
            self.budget.refresh()

    def rename(self, title: str) -> None:
        title = title.strip() or DEFAULT_TITLE
        if title != self.conversation.title:
            self.conversation.title = title
            self._store.save_conversation(self.conversation)
            self.titleChanged.emit(title)

    # -- sending -------------------------------------------------------------------------------

    def send(self, text: str) -> bool:
        """Send `text`, or queue it while a reply is being written (or others wait)."""
        text = text.strip()
        if not text:
            return False
        if self.busy or len(self.queue):
            self.queue.push(text)
            if not self.busy:
                self._send_next()
            return True
        self._send_now(text)
        return True

    def send_queued(self, row: int | None = None) -> bool:
        """Send the queued message at `row` (default: the first) now; after a reply was stopped
        the queue waits for this."""
        if self.busy or not len(self.queue):
            return False
        text = self.queue.take(row)
        if text is None:
            return False
        self._send_now(text)
        return True

    def cancel_queued(self, row: int) -> bool:
        return self.queue.cancel(row)

    def _send_next(self) -> None:
        text = self.queue.take()
        if text is not None:
            self._send_now(text)

    def _send_now(self, text: str) -> None:
        message = self._store.add_message(
            self.conversation.id, Message(role=Role.USER, content=text)
        )
        self.model.insert(self._first_queued_row(), message)
        if self.conversation.title == DEFAULT_TITLE:
            self.rename(title_from(text))
        self._start_reply(message.id)

    # -- versions: regenerate, edit, switch ----------------------------------------------------

    def regenerate(self, row: int | None = None) -> bool:
        """Write the reply at `row` (default: the last reply) again, as a new version."""
        if self.busy:
            return False
        if row is None:
            replies = [r for r, m in enumerate(self.model.sent()) if m.role is Role.ASSISTANT]
            if not replies:
                return False
            row = replies[-1]
        if not self._is(row, Role.ASSISTANT):
            return False
        parent = self.model.message(row).parent_id
        self._show_from(row, [])
        self._start_reply(parent)
        return True

    def edit(self, row: int, text: str) -> bool:
        """Send `text` as a new version of the user message at `row` (the old one stays)."""
        text = text.strip()
        if self.busy or not text or not self._is(row, Role.USER):
            return False
        old = self.model.message(row)
        if text == old.content:
            return False
        message = self._store.add_message(
            self.conversation.id, Message(role=Role.USER, content=text), parent_id=old.parent_id
        )
        self._show_from(row, [message])
        self._start_reply(message.id)
        return True

    def switch_version(self, row: int, step: int) -> bool:
        """Show the version `step` away (-1: previous, +1: next) of the message at `row`."""
        if self.busy or not 0 <= row < self.model.rowCount():
            return False
        message = self.model.message(row)
        at = message.version[0] - 1 + step
        if message.id is None or not 0 <= at < len(message.siblings):
            return False
        self._store.show_version(self.conversation.id, message.siblings[at])
        self._sync()
        return True

    def reveal(self, message_id: int) -> int:
        """Show the branch through `message_id` (a search hit); return its row, or -1."""
        row = self.model.row_of(message_id)
        if row < 0 and not self.busy and self._store.message(message_id) is not None:
            self._store.show_version(self.conversation.id, message_id)
            self._sync()
            row = self.model.row_of(message_id)
        return row

    def fork(self, row: int) -> Conversation | None:
        """New chat from here: a copy of the branch down to the message at `row`."""
        if not 0 <= row < self.model.rowCount():
            return None
        message = self.model.message(row)
        if message.id is None or message.status is MessageStatus.GENERATING:
            return None
        conversation = self._store.fork(self.conversation.id, message.id)
        self.forked.emit(conversation)
        return conversation

    # -- continue, delete ----------------------------------------------------------------------

    def can_continue(self, row: int) -> bool:
        """The last message, a reply that ended early (cut at max tokens, stopped, interrupted)."""
        last = len(self.model.sent()) - 1
        return not self.busy and row == last >= 0 and self.model.message(row).continuable

    def continue_reply(self, row: int | None = None) -> bool:
        """Extend the reply at `row` (default: the last one) where it stopped."""
        row = len(self.model.sent()) - 1 if row is None else row
        if not self.can_continue(row):
            return False
        message = self.model.message(row)
        self._store.update_message(
            message.id, content=message.content, status=MessageStatus.GENERATING
        )
        self.model.update(row, status=MessageStatus.GENERATING, error=None)
        self._run_reply(message, continue_reply=True)
        return True

    def delete_message(self, row: int) -> bool:
        """Delete the message at `row` (Undo brings it back)."""
        if not 0 <= row < self.model.rowCount():
            return False
        message = self.model.message(row)
        if message.status is MessageStatus.QUEUED:
            return self.queue.cancel(row)
        if self.busy:
            return False
        leaf = self._store.current_leaf(self.conversation.id)
        self.undo_stack.push(DeleteMessage(self._store, message, leaf, self._sync))
        return True

    def undo(self) -> bool:
        if self.busy or not self.undo_stack.canUndo():
            return False
        self.undo_stack.undo()
        return True

    # -- stopping ------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the running reply; what was written so far is kept (status "stopped"). Queued
        messages wait (`send_queued`)."""
        if self._stream is not None:
            self._stream.stop()

    def close(self) -> None:
        """Stop any reply; `closed` fires once its last text is stored."""
        self.budget.cancel()
        stream = self._stream
        if stream is not None:
            stream.ended.connect(lambda _r, _e: self.closed.emit())
            stream.stop()
        else:
            QTimer.singleShot(0, self, self.closed.emit)

    async def shutdown(self) -> None:
        """Stop any reply and wait until its text is stored."""
        stream = self._stream
        if stream is not None:
            stream.stop()
            await stream.wait()

    # -- the reply -----------------------------------------------------------------------------

    def request_messages(self, upto: int | None = None) -> list[dict[str, str]]:
        """The system prompt and the branch on screen (to row `upto`), as the engine takes it."""
        messages = []
        if self.conversation.system_prompt.strip():
            messages.append({"role": "system", "content": self.conversation.system_prompt.strip()})
        sent = self.model.sent()
        for message in sent if upto is None else sent[: upto + 1]:
            if message.content:
                messages.append({"role": message.role.value, "content": message.content})
        return messages

    def _start_reply(self, parent_id: int | None) -> None:
        """A new reply to the branch on screen, as a child of `parent_id`."""
        message = self._store.add_message(
            self.conversation.id,
            Message(role=Role.ASSISTANT, content="", status=MessageStatus.GENERATING),
            parent_id=parent_id,
        )
        self.model.insert(self._first_queued_row(), message)
        self._run_reply(message, continue_reply=False)

    def _run_reply(self, message: Message, *, continue_reply: bool) -> None:
        row = self.model.row_of(message.id)
        settings = self.settings
        request = GenerationRequest(
            messages=self.request_messages(row if continue_reply else row - 1),
            max_tokens=settings.max_tokens,
            sampling=settings.sampling_params(),
            speculative=settings.speculative_params(),
            continue_reply=continue_reply,
            model=settings.model,  # loaded on first use; other chats are not touched
        )
        stream = ReplyStream(
            request,
            message.id,
            store=self._store,
            bridge=self._bridge,
            model=self.model,
            content=message.content if continue_reply else "",
            spans=message.draft_spans if continue_reply else None,
            persist_interval_s=self._persist_interval,
            parent=self,
        )
        stream.statsChanged.connect(self._on_stats)
        stream.modelLoading.connect(self.modelLoading)
        stream.ended.connect(lambda reason, error: self._ended(stream, reason, error))
        self._stream = stream
        self.rate_history.clear()
        stream.start()
        self.busyChanged.emit()

    def _on_stats(self, stats: RequestStats) -> None:
        self.last_stats = stats
        if stats.decode_tokens_per_s:
            self.rate_history.append((time.monotonic(), stats.decode_tokens_per_s))
        self.budget.set_used(stats.context_tokens)
        self.replyStats.emit(stats)

    def _ended(self, stream: ReplyStream, reason: str, error: str) -> None:
        if self._stream is not stream:
            return
        self._stream = None
        self.busyChanged.emit()
        self.replyFinished.emit(reason)
        if error:
            self.errorOccurred.emit(error)
        if reason != FinishReason.CANCELLED.value:
            self._send_next()

    # -- helpers -------------------------------------------------------------------------------

    def _is(self, row: int, role: Role) -> bool:
        if not 0 <= row < self.model.rowCount():
            return False
        message = self.model.message(row)
        return message.role is role and message.status is not MessageStatus.QUEUED

    def _first_queued_row(self) -> int:
        queued = self.model.queued_rows()
        return queued[0] if queued else self.model.rowCount()

    def _show_from(self, row: int, messages: list[Message]) -> None:
        """Rows from `row` on become `messages`, then the queued ones."""
        self.model.replace_from(row, messages + self.queue.rows())

    def _sync(self) -> None:
        """Show the branch the store has on screen, keeping the rows that did not change."""
        branch = self._store.messages(self.conversation.id)
        shown = self.model.sent()
        same = 0
        while (
            same < min(len(branch), len(shown))
            and branch[same].id == shown[same].id
            and branch[same].siblings == shown[same].siblings
        ):
            same += 1
        self._show_from(same, branch[same:])
        self.last_stats = self._store.last_reply_stats(self.conversation.id)
        self.replyStats.emit(self.last_stats)
        self.budget.refresh()
        self.historyChanged.emit()

"""One chat's logic: sending, streaming, stopping, regenerating and editing, with the reply
persisted as it arrives.

What the user sees never runs ahead of what is stored: streamed text is coalesced, written to
SQLite (status "generating"), and only then put into the message model that the view shows. So a
crash (even SIGKILL) loses nothing that was on screen.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QTimer, Signal

from app.chat.draft_spans import merge, shifted, split_delta
from app.chat.message_model import MessageListModel
from app.engine_bridge import EngineBridge
from app.formatting import stats_summary
from app.settings.chat_settings import ChatSettings
from app.store.conversation_store import Store
from app.store.records import DEFAULT_TITLE, Conversation, Message, MessageStatus, Role
from engine.requests import (
    ErrorEvent,
    FinishedEvent,
    FinishReason,
    GenerationRequest,
    RequestStats,
    SpecMethod,
    StatsEvent,
    TokenEvent,
)

log = logging.getLogger(__name__)

DEFAULT_PERSIST_INTERVAL_S = 0.1  # streamed text reaches SQLite (then the screen) this often
DEFAULT_RATE_HISTORY = 120
TITLE_CHARS = 40


@dataclass
class _Reply:
    row: int
    message_id: int
    request_id: str
    content: str = ""
    spans: list[tuple[int, int]] = field(default_factory=list)
    stats: RequestStats | None = None
    dirty: bool = False
    last_flush: float = 0.0


class ChatController(QObject):
    # No bool payload: PySide6 6.12 loses a reference to True on every Python emit of True.
    busyChanged = Signal()  # read `busy`
    replyStats = Signal(object)  # RequestStats of the running (or last) reply
    replyFinished = Signal(str)  # "stop", "length", "cancelled" or "error"
    errorOccurred = Signal(str)
    titleChanged = Signal(str)
    settingsChanged = Signal(object)  # ChatSettings
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
        self.last_stats: RequestStats | None = None
        self.rate_history: deque[tuple[float, float]] = deque(maxlen=DEFAULT_RATE_HISTORY)
        self._reply: _Reply | None = None
        self._task: asyncio.Task | None = None
        self._busy = False
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.timeout.connect(self._flush)

    # -- state ---------------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        return self._busy

    @property
    def settings(self) -> ChatSettings:
        return self.conversation.settings

    @property
    def request_id(self) -> str | None:
        return self._reply.request_id if self._reply else None

    def set_settings(self, settings: ChatSettings) -> None:
        """Applies to the next reply; the panel shows it at once (settingsChanged)."""
        self.conversation.settings = settings.normalized()
        self._store.save_conversation(self.conversation)
        self.settingsChanged.emit(self.conversation.settings)

    def set_system_prompt(self, text: str) -> None:
        if text != self.conversation.system_prompt:
            self.conversation.system_prompt = text
            self._store.save_conversation(self.conversation)

    def rename(self, title: str) -> None:
        title = title.strip() or DEFAULT_TITLE
        if title != self.conversation.title:
            self.conversation.title = title
            self._store.save_conversation(self.conversation)
            self.titleChanged.emit(title)

    # -- user actions --------------------------------------------------------------------------

    def send(self, text: str) -> bool:
        text = text.strip()
        if not text or self.busy:
            return False
        self._add_message(Message(role=Role.USER, content=text))
        if self.conversation.title == DEFAULT_TITLE:
            self.rename(_title_from(text))
        self._start_reply()
        return True

    def regenerate(self, row: int | None = None) -> bool:
        """Write the reply at `row` (default: the last reply) again."""
        if self.busy:
            return False
        if row is None:
            rows = [r for r, m in enumerate(self.model.messages()) if m.role is Role.ASSISTANT]
            if not rows:
                return False
            row = rows[-1]
        if (
            not 0 <= row < self.model.rowCount()
            or self.model.message(row).role is not Role.ASSISTANT
        ):
            return False
        self._truncate(row)
        self._start_reply()
        return True

    def edit(self, row: int, text: str) -> bool:
        """Replace the user message at `row` with `text`, drop what followed, reply again."""
        text = text.strip()
        if self.busy or not text or not 0 <= row < self.model.rowCount():
            return False
        if self.model.message(row).role is not Role.USER:
            return False
        self._truncate(row)
        self._add_message(Message(role=Role.USER, content=text))
        self._start_reply()
        return True

    def stop(self) -> None:
        """Stop the running reply; what was written so far is kept (status "stopped")."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def close(self) -> None:
        """Stop any reply; `closed` fires once its last text is stored."""
        if self._task is not None and not self._task.done():
            self._task.add_done_callback(lambda _t: self.closed.emit())
            self._task.cancel()
        else:
            QTimer.singleShot(0, self.closed.emit)

    async def shutdown(self) -> None:
        """Stop any reply and wait until its text is stored."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass

    # -- the reply -----------------------------------------------------------------------------

    def _request_messages(self) -> list[dict[str, str]]:
        messages = []
        if self.conversation.system_prompt.strip():
            messages.append({"role": "system", "content": self.conversation.system_prompt.strip()})
        for message in self.model.messages():
            if message.content:
                messages.append({"role": message.role.value, "content": message.content})
        return messages

    def _start_reply(self) -> None:
        settings = self.settings
        request = GenerationRequest(
            messages=self._request_messages(),
            max_tokens=settings.max_tokens,
            sampling=settings.sampling_params(),
            speculative=settings.speculative_params(),
        )
        message = self._add_message(
            Message(role=Role.ASSISTANT, content="", status=MessageStatus.GENERATING)
        )
        self._reply = _Reply(
            row=self.model.last_row(), message_id=message.id, request_id=request.request_id
        )
        self.rate_history.clear()
        self._busy = True
        reply = self._reply
        self._task = asyncio.ensure_future(self._run(request, reply))
        # a task cancelled before its first step never runs its finally: finish it here
        self._task.add_done_callback(
            lambda _t: self._reply is reply and self._finish(reply, MessageStatus.STOPPED, None)
        )
        self.busyChanged.emit()

    async def _run(self, request: GenerationRequest, reply: _Reply) -> None:
        status, error, reason = MessageStatus.GENERATING, None, "error"
        try:
            settings = self.settings
            if settings.model and settings.model != self._bridge.model_spec:
                await self._bridge.load_model(settings.model)
            uses_draft = settings.spec_method in (
                SpecMethod.DRAFT_MODEL.value,
                SpecMethod.AUTO.value,
            )
            if (
                uses_draft
                and settings.draft_model
                and settings.draft_model != self._bridge.draft_spec
            ):
                await self._bridge.load_draft_model(settings.draft_model)
            stream = self._bridge.submit(request)
            try:
                async for event in stream:
                    if isinstance(event, TokenEvent):
                        self._on_tokens(reply, event)
                    elif isinstance(event, StatsEvent):
                        self._on_stats(reply, event.stats)
                    elif isinstance(event, FinishedEvent):
                        reply.content = event.text
                        reply.spans = _clip(reply.spans, len(event.text))
                        if event.stats.finish_reason is None:
                            event.stats.finish_reason = event.finish_reason
                        self._on_stats(reply, event.stats)
                        reason = event.finish_reason.value
                        cancelled = event.finish_reason is FinishReason.CANCELLED
                        status = MessageStatus.STOPPED if cancelled else MessageStatus.DONE
                    elif isinstance(event, ErrorEvent):
                        if event.stats is not None:
                            self._on_stats(reply, event.stats)
                        status, error = MessageStatus.ERROR, event.message
            finally:
                await stream.aclose()
            if status is MessageStatus.GENERATING:
                status, error = MessageStatus.ERROR, "the reply ended without a result"
        except asyncio.CancelledError:
            status, reason = MessageStatus.STOPPED, FinishReason.CANCELLED.value
            raise
        except Exception as exc:  # noqa: BLE001 - shown on the message
            log.exception("reply failed")
            status, error = MessageStatus.ERROR, str(exc) or type(exc).__name__
        finally:
            self._finish(reply, status, error, reason=reason)

    def _on_tokens(self, reply: _Reply, event: TokenEvent) -> None:
        if event.text:
            pieces = getattr(
                event, "text_pieces", None
            )  # exact per-token text, when the engine has it
            spans = split_delta(event.text, event.from_draft, pieces)
            reply.spans = merge(reply.spans + shifted(spans, len(reply.content)))
            reply.content += event.text
            reply.dirty = True
            self._schedule_flush()

    def _on_stats(self, reply: _Reply, stats: RequestStats) -> None:
        reply.stats = stats
        self.last_stats = stats
        if stats.decode_tokens_per_s:
            self.rate_history.append((time.monotonic(), stats.decode_tokens_per_s))
        self.replyStats.emit(stats)

    def _schedule_flush(self) -> None:
        wait = self._persist_interval - (time.monotonic() - self._reply.last_flush)
        if wait <= 0:
            self._flush()
        elif not self._flush_timer.isActive():
            self._flush_timer.start(max(1, int(wait * 1000)))

    def _flush(self) -> None:
        """Store the reply so far, then show it."""
        reply = self._reply
        if reply is None or not reply.dirty:
            return
        reply.dirty = False
        reply.last_flush = time.monotonic()
        summary = stats_summary(reply.stats) if reply.stats else None
        self._store.update_message(
            reply.message_id,
            content=reply.content,
            status=MessageStatus.GENERATING,
            draft_spans=reply.spans,
            stats=summary,
        )
        self.model.update(
            reply.row, content=reply.content, draft_spans=list(reply.spans), stats=summary
        )

    def _finish(
        self, reply: _Reply, status: MessageStatus, error: str | None, *, reason: str = "cancelled"
    ) -> None:
        if self._reply is not reply:
            return
        self._flush_timer.stop()
        summary = stats_summary(reply.stats) if reply.stats else None
        self._store.update_message(
            reply.message_id,
            content=reply.content,
            status=status,
            draft_spans=reply.spans,
            stats=summary,
            error=error,
        )
        if reply.row < self.model.rowCount():
            self.model.update(
                reply.row,
                content=reply.content,
                status=status,
                draft_spans=list(reply.spans),
                stats=summary,
                error=error,
            )
        self._reply = None
        self._busy = False
        self.busyChanged.emit()
        self.replyFinished.emit(reason)
        if error:
            self.errorOccurred.emit(error)

    # -- helpers -------------------------------------------------------------------------------

    def _add_message(self, message: Message) -> Message:
        self._store.add_message(self.conversation.id, message)
        self.model.append(message)
        return message

    def _truncate(self, row: int) -> None:
        message = self.model.message(row)
        self._store.delete_messages_from(self.conversation.id, message.id)
        self.model.remove_from(row)


def _title_from(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else DEFAULT_TITLE
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


def _clip(spans: list[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    return [(s, min(e, length)) for s, e in spans if s < length]

"""One reply being written: the engine's events for one request, stored as they arrive and only
then shown.

What the user sees never runs ahead of what is stored: streamed text is coalesced, written to
SQLite (status "generating"), and only then put into the message model that the view shows. So a
crash (even SIGKILL) loses nothing that was on screen. A continued reply starts from the text it
already has and appends to it.
"""

from __future__ import annotations

import asyncio
import logging
import time

from PySide6.QtCore import QObject, QTimer, Signal

from app.chat.draft_spans import merge, shifted, split_delta
from app.chat.message_model import MessageListModel
from app.engine_bridge import EngineBridge
from app.store.conversation_store import Store
from app.store.records import MessageStatus
from app.store.reply_stats import encode
from engine.requests import (
    ErrorEvent,
    FinishedEvent,
    FinishReason,
    GenerationRequest,
    ModelLoadingEvent,
    RequestStats,
    StatsEvent,
    TokenEvent,
)

log = logging.getLogger(__name__)

DEFAULT_PERSIST_INTERVAL_S = 0.1  # streamed text reaches SQLite (then the screen) this often


class ReplyStream(QObject):
    """Streams one request into one assistant message of the store and the model."""

    statsChanged = Signal(object)  # RequestStats
    modelLoading = Signal(str)  # "Loading X: reading weights 40%" while its model loads; "" after
    ended = Signal(str, str)  # reason ("stop", "length", "cancelled", "error"), error or ""

    def __init__(
        self,
        request: GenerationRequest,
        message_id: int,
        *,
        store: Store,
        bridge: EngineBridge,
        model: MessageListModel,
        content: str = "",
        spans: list[tuple[int, int]] | None = None,
        persist_interval_s: float = DEFAULT_PERSIST_INTERVAL_S,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.request = request
        self.message_id = message_id
        self.content = content
        self.spans = list(spans or [])
        self.stats: RequestStats | None = None
        self._base = len(content)  # a continuation's new text starts here
        self._store, self._bridge, self._model = store, bridge, model
        self._interval = persist_interval_s
        self._dirty = False
        self._last_flush = 0.0
        self._ended = False
        self._task: asyncio.Task | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self._flush)

    @property
    def running(self) -> bool:
        return not self._ended

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())
        # a task cancelled before its first step never runs its finally: end it here
        self._task.add_done_callback(
            lambda _t: self._end(MessageStatus.STOPPED, None, FinishReason.CANCELLED.value)
        )

    def stop(self) -> None:
        """Stop writing; the text so far is kept (status "stopped")."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def wait(self) -> None:
        """Until the reply has ended and its last text is stored."""
        if self._task is not None:
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    # -- the request ---------------------------------------------------------------------------

    async def _run(self) -> None:
        status, error, reason = MessageStatus.GENERATING, None, FinishReason.ERROR.value
        loading = False
        try:
            stream = self._bridge.submit(self.request)
            try:
                async for event in stream:
                    if isinstance(event, ModelLoadingEvent):
                        loading = True
                        self.modelLoading.emit(_loading_text(event))
                        continue
                    if loading:
                        loading = False
                        self.modelLoading.emit("")
                    if isinstance(event, TokenEvent):
                        self._on_tokens(event)
                    elif isinstance(event, StatsEvent):
                        self._on_stats(event.stats)
                    elif isinstance(event, FinishedEvent):
                        self.content = self.content[: self._base] + event.text
                        self.spans = _clip(self.spans, len(self.content))
                        if event.stats.finish_reason is None:
                            event.stats.finish_reason = event.finish_reason
                        self._on_stats(event.stats)
                        reason = event.finish_reason.value
                        cancelled = event.finish_reason is FinishReason.CANCELLED
                        status = MessageStatus.STOPPED if cancelled else MessageStatus.DONE
                    elif isinstance(event, ErrorEvent):
                        if event.stats is not None:
                            self._on_stats(event.stats)
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
            if loading:
                self.modelLoading.emit("")
            self._end(status, error, reason)

    def _on_tokens(self, event: TokenEvent) -> None:
        if event.text:
            spans = split_delta(event.text, event.from_draft, event.text_pieces or None)
            self.spans = merge(self.spans + shifted(spans, len(self.content)))
            self.content += event.text
            self._dirty = True
            self._schedule_flush()

    def _on_stats(self, stats: RequestStats) -> None:
        self.stats = stats
        self.statsChanged.emit(stats)

    # -- storing, then showing -----------------------------------------------------------------

    def _schedule_flush(self) -> None:
        wait = self._interval - (time.monotonic() - self._last_flush)
        if wait <= 0:
            self._flush()
        elif not self._timer.isActive():
            self._timer.start(max(1, int(wait * 1000)))

    def _flush(self) -> None:
        """Store the reply so far, then show it."""
        if not self._dirty or self._ended:
            return
        self._dirty = False
        self._last_flush = time.monotonic()
        self._save(MessageStatus.GENERATING, None)

    def _end(self, status: MessageStatus, error: str | None, reason: str) -> None:
        if self._ended:
            return
        self._timer.stop()
        self._save(status, error)
        self._ended = True
        self.ended.emit(reason, error or "")

    def _save(self, status: MessageStatus, error: str | None) -> None:
        stats = encode(self.stats) if self.stats else None
        self._store.update_message(
            self.message_id,
            content=self.content,
            status=status,
            draft_spans=self.spans,
            stats=stats,
            error=error,
        )
        row = self._model.row_of(self.message_id)
        if row >= 0:
            changes = dict(content=self.content, status=status, draft_spans=list(self.spans))
            if stats is not None:
                changes["stats"] = stats
            self._model.update(row, error=error, **changes)


def _loading_text(event: ModelLoadingEvent) -> str:
    done = f" {event.fraction:.0%}" if 0 <= event.fraction < 1 else ""
    return f"Loading {event.model}: {event.message.lower()}{done}"


def _clip(spans: list[tuple[int, int]], length: int) -> list[tuple[int, int]]:
    return [(s, min(e, length)) for s, e in spans if s < length]

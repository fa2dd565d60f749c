"""How much of the model's context a chat uses, and whether the next message will fit: exact
counts from the engine (`Engine.count_tokens`, `RequestStats.context_tokens`) and, while a count
is on its way, a bound that never says "fits" wrongly."""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from app.engine_bridge import EngineBridge

log = logging.getLogger(__name__)

DEFAULT_REPLY_ROOM = 64  # tokens a reply needs at least; with less left a message does not fit
DRAFT_COUNT_DELAY_MS = 250
TEMPLATE_SLACK = 16  # tokens a chat template may add around one message
Messages = list[dict[str, str]]


class Fit(enum.Enum):
    """Whether a message can be sent in this chat."""

    FITS = "fits"
    TOO_LONG = "too long"
    UNKNOWN = "unknown"  # only an exact count can tell


class ContextBudget(QObject):
    """The context use of one chat: the branch on screen and the message being typed."""

    changed = Signal()

    def __init__(
        self,
        bridge: EngineBridge,
        messages: Callable[[], Messages],
        *,
        model: Callable[[], str | None] = lambda: None,
        reply_room: int = DEFAULT_REPLY_ROOM,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._bridge = bridge
        self._messages = messages  # the request messages of the branch on screen
        self._model = model  # the chat's model setting (None: the engine's default model)
        self.reply_room = reply_room
        self.used: int | None = None  # tokens of the branch on screen (exact)
        self.with_draft: int | None = None  # tokens with the typed message added (exact)
        self._draft = ""
        self._counted_draft: str | None = None
        self._tasks: set[asyncio.Task] = set()
        self._running: set[str] = set()  # "branch", "draft": counts under way
        self._again: set[str] = set()  # counts asked for again while under way
        self._draft_timer = QTimer(self)
        self._draft_timer.setSingleShot(True)
        self._draft_timer.setInterval(DRAFT_COUNT_DELAY_MS)
        self._draft_timer.timeout.connect(lambda: self._count("draft"))
        bridge.modelLoaded.connect(lambda _info: self.refresh())
        bridge.modelAdded.connect(lambda _info: self.changed.emit())  # its limit may be known now

    # -- what the meter shows --------------------------------------------------------------------

    @property
    def limit(self) -> int | None:
        """The context length of the chat's model, once known (it is loaded)."""
        return self._bridge.context_length(self._model())

    @property
    def draft_tokens(self) -> int | None:
        """What the typed message adds, once counted."""
        if self.with_draft is None or self.used is None or self._counted_draft != self._draft:
            return None
        return max(0, self.with_draft - self.used)

    @property
    def full(self) -> bool:
        """No room left for a reply on the branch on screen."""
        limit = self.limit
        return limit is not None and self.used is not None and self.used + self.reply_room > limit

    # -- updates ---------------------------------------------------------------------------------

    def set_used(self, tokens: int) -> None:
        """The exact context use after a reply (RequestStats.context_tokens)."""
        if tokens > 0 and tokens != self.used:
            self.used = tokens
            self.changed.emit()

    def refresh(self) -> None:
        """Count the branch on screen again (it changed)."""
        self._count("branch")
        if self._draft:
            self._count("draft")

    def set_draft(self, text: str) -> None:
        """The message being typed; counted once typing pauses."""
        text = text.strip()
        if text == self._draft:
            return
        self._draft = text
        if text:
            self._draft_timer.start()
        else:
            self._draft_timer.stop()
            self.with_draft = None
        self.changed.emit()

    # -- will it fit -----------------------------------------------------------------------------

    def check(self, text: str) -> Fit:
        """Whether `text` sent now leaves room for a reply, without waiting for the engine."""
        limit = self.limit
        if limit is None:
            return Fit.FITS  # the model states no limit: the engine will say if it is too long
        text = text.strip()
        if self._counted_draft == text and self.with_draft is not None:
            return Fit.FITS if self.with_draft + self.reply_room <= limit else Fit.TOO_LONG
        if self._upper_bound(text) + self.reply_room <= limit:
            return Fit.FITS
        return Fit.UNKNOWN

    async def count_with(self, text: str) -> int:
        """Exact prompt tokens of the branch on screen plus `text` as the next message."""
        return await self._bridge.count_tokens(self._with(text), model=self._model())

    def fits(self, tokens: int) -> bool:
        limit = self.limit
        return limit is None or tokens + self.reply_room <= limit

    def _upper_bound(self, text: str) -> int:
        """Tokens are at least one byte each (byte-level BPE, byte fallback), so bytes plus the
        template's markers bound them from above."""
        if self.used is not None:
            base = self.used
        else:
            base = sum(len(m["content"].encode()) + TEMPLATE_SLACK for m in self._messages())
        return base + len(text.encode()) + 2 * TEMPLATE_SLACK

    def _with(self, text: str) -> Messages:
        return self._messages() + [{"role": "user", "content": text}]

    # -- counting --------------------------------------------------------------------------------

    def _count(self, what: str) -> None:
        """Start (or, if one is running, queue) a count of the branch or of branch + draft."""
        if not self._bridge.ready:
            return
        if what in self._running:
            self._again.add(what)
            return
        self._running.add(what)
        task = asyncio.ensure_future(self._run_count(what))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_count(self, what: str) -> None:
        try:
            while True:
                self._again.discard(what)
                await self._count_once(what)
                if what not in self._again:
                    return
        finally:
            self._running.discard(what)

    async def _count_once(self, what: str) -> None:
        draft = self._draft
        if what == "draft" and not draft:
            self.with_draft = None
            return
        messages = self._with(draft) if what == "draft" else self._messages()
        try:
            tokens = await self._bridge.count_tokens(messages, model=self._model())
        except Exception as exc:  # noqa: BLE001 - the meter shows "unknown" instead
            log.debug("count_tokens failed: %s", exc)
            return
        if what == "draft":
            self.with_draft, self._counted_draft = tokens, draft
        else:
            self.used = tokens
        self.changed.emit()

    def cancel(self) -> None:
        self._draft_timer.stop()
        for task in list(self._tasks):
            task.cancel()

"""The chat settings form (a dock): model, speculation and sampling for the current chat, and the
defaults new chats start with. Every change applies to the chat's next reply at once."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QIntValidator
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.models.model_catalog import ModelEntry
from app.settings.chat_settings import (
    MAX_MAX_TOKENS,
    MAX_NGRAM,
    SPEC_METHOD_DESCRIPTIONS,
    SPEC_METHOD_LABELS,
    ChatSettings,
)
from app.settings.draft_model_row import DraftModelRow, draft_refusal
from app.settings.method_picker import grey_out, method_refusal
from app.widgets.form_fields import FIELD_MIN_WIDTH, float_field, int_field, select_data
from app.widgets.metric_card import MetricCard
from engine.engine_reports import ModelInfo
from engine.requests import MAX_DRAFT_TOKENS, SpecMethod

DEFAULT_MODEL_TEXT = "Default model"
SYSTEM_PROMPT_SAVE_MS = 400  # the default system prompt is stored once typing pauses
SYSTEM_PROMPT_LINES = 3


class ChatSettingsForm(QScrollArea):
    """The settings dock's form; it edits a ChatSettings and says so through signals."""

    settingsEdited = Signal(object)  # ChatSettings, after every accepted change
    saveAsDefault = Signal(object)  # ChatSettings
    resetRequested = Signal()
    draftRefused = Signal(str)  # why the chosen draft model was refused
    defaultSystemPromptEdited = Signal(str)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("PanelScroll")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._settings = ChatSettings()
        self._target: ModelInfo | None = None  # the engine's default model
        self._entries: list[ModelEntry] = []
        self._updating = False

        body = QWidget()
        body.setObjectName("DockBody")
        layout = QVBoxLayout(body)
        layout.setContentsMargins(12, 4, 12, 12)
        layout.setSpacing(10)

        model_card = MetricCard("Model")
        self.model_combo = QComboBox()
        self.model_combo.setToolTip(
            "The model this chat uses from its next reply: loaded on first use, while other "
            "chats keep theirs"
        )
        model_card.add_widget(self.model_combo)
        layout.addWidget(model_card)

        spec_card = MetricCard("Speculative decoding")
        self._spec_form = spec_form = self._form(spec_card)
        self._forms = [spec_form]
        self.method = QComboBox()
        for value, label in SPEC_METHOD_LABELS.items():
            self.method.addItem(label, value)
            self.method.setItemData(
                self.method.count() - 1,
                SPEC_METHOD_DESCRIPTIONS[value],
                Qt.ItemDataRole.ToolTipRole,
            )
        self.method_help = QLabel()
        self.method_help.setObjectName("Hint")
        self.method_help.setWordWrap(True)
        self.draft_tokens = int_field(1, MAX_DRAFT_TOKENS)
        self._draft = DraftModelRow(self._draft_refusal)
        self.draft_model = self._draft.combo
        self.draft_error = self._draft.error
        self.ngram_min = int_field(1, MAX_NGRAM)
        self.ngram_max = int_field(1, MAX_NGRAM)
        self._ngram_to = QLabel("to")
        self._ngram_row = QHBoxLayout()
        self._ngram_row.setContentsMargins(0, 0, 0, 0)
        self._ngram_row.setSpacing(6)
        self._ngram_row.addWidget(self.ngram_min)
        self._ngram_row.addWidget(self._ngram_to)
        self._ngram_row.addWidget(self.ngram_max)
        spec_form.addRow("Method", self.method)
        spec_form.addRow(self.method_help)
        spec_form.addRow("Draft tokens (k)", self.draft_tokens)
        spec_form.addRow("Draft model", self._draft)
        spec_form.addRow("N-gram sizes", self._ngram_row)
        spec_card.add_widget(self.draft_error)
        layout.addWidget(spec_card)

        sampling_card = MetricCard("Sampling")
        form = self._form(sampling_card)
        self._forms.append(form)
        self.temperature = float_field(0.0, 5.0, 0.05)
        self.top_p = float_field(0.0, 1.0, 0.01)
        self.top_k = int_field(0, 100000)
        self.top_k.setSpecialValueText("off")
        self.min_p = float_field(0.0, 1.0, 0.01)
        self.repetition_penalty = float_field(0.5, 3.0, 0.01)
        self.seed = QLineEdit()
        self.seed.setPlaceholderText("random")
        self.seed.setValidator(QIntValidator(0, 2**31 - 1))
        self.max_tokens = int_field(1, MAX_MAX_TOKENS)
        self.max_tokens.setSingleStep(64)
        form.addRow("Temperature", self.temperature)
        form.addRow("Top-p", self.top_p)
        form.addRow("Top-k", self.top_k)
        form.addRow("Min-p", self.min_p)
        form.addRow("Repetition penalty", self.repetition_penalty)
        form.addRow("Seed", self.seed)
        form.addRow("Max tokens", self.max_tokens)
        layout.addWidget(sampling_card)

        layout.addWidget(self._defaults_card())
        layout.addStretch(1)
        self.setWidget(body)

        for combo in (self.model_combo, self.method, self.draft_model):
            combo.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            combo.setMinimumContentsLength(8)
            combo.setMinimumWidth(FIELD_MIN_WIDTH)
        self.seed.setMinimumWidth(FIELD_MIN_WIDTH)
        self.set_models([])
        for spin in (self.draft_tokens, self.ngram_min, self.ngram_max, self.top_k):
            spin.valueChanged.connect(self._edited)
        for spin in (self.max_tokens, self.temperature, self.top_p, self.min_p):
            spin.valueChanged.connect(self._edited)
        self.repetition_penalty.valueChanged.connect(self._edited)
        self.method.currentIndexChanged.connect(self._edited)
        self.model_combo.currentIndexChanged.connect(self._edited)
        self._draft.chosen.connect(self._edited)
        self._draft.refused.connect(self.draftRefused)
        self.seed.editingFinished.connect(self._edited)
        self._align_labels()
        self.set_settings(ChatSettings())

    def _defaults_card(self) -> MetricCard:
        card = MetricCard("New chats")
        card.add_caption("Default system prompt")
        self.default_system_prompt = QPlainTextEdit()
        self.default_system_prompt.setObjectName("DefaultSystemPrompt")
        self.default_system_prompt.setPlaceholderText("Every new chat starts with this (optional)")
        self.default_system_prompt.setTabChangesFocus(True)
        lines = self.default_system_prompt.fontMetrics().lineSpacing() * SYSTEM_PROMPT_LINES
        self.default_system_prompt.setFixedHeight(lines + 16)
        card.add_widget(self.default_system_prompt)
        self._prompt_timer = QTimer(self)
        self._prompt_timer.setSingleShot(True)
        self._prompt_timer.setInterval(SYSTEM_PROMPT_SAVE_MS)
        self._prompt_timer.timeout.connect(self._emit_default_prompt)
        self.default_system_prompt.textChanged.connect(self._prompt_typed)
        buttons = QWidget()
        row = QHBoxLayout(buttons)
        row.setContentsMargins(0, 4, 0, 0)
        save = QPushButton("Save as default")
        save.setToolTip("New chats start with this chat's settings")
        save.clicked.connect(lambda: self.saveAsDefault.emit(self._settings))
        reset = QPushButton("Reset")
        reset.setToolTip("Use the default settings in this chat")
        reset.clicked.connect(self.resetRequested)
        row.addWidget(save)
        row.addWidget(reset)
        row.addStretch(1)
        card.add_widget(buttons)
        return card

    # -- public --------------------------------------------------------------------------------

    @property
    def settings(self) -> ChatSettings:
        return self._settings

    def set_settings(self, settings: ChatSettings) -> None:
        self._updating = True
        try:
            self._settings = settings
            select_data(self.model_combo, settings.model)
            self.method.setCurrentIndex(max(0, self.method.findData(settings.spec_method)))
            self.draft_tokens.setValue(settings.draft_tokens)
            self._draft.select(settings.draft_model)
            self.ngram_min.setValue(settings.ngram_min)
            self.ngram_max.setValue(settings.ngram_max)
            self.temperature.setValue(settings.temperature)
            self.top_p.setValue(settings.top_p)
            self.top_k.setValue(settings.top_k)
            self.min_p.setValue(settings.min_p)
            self.repetition_penalty.setValue(settings.repetition_penalty)
            self.seed.setText("" if settings.seed is None else str(settings.seed))
            self.max_tokens.setValue(settings.max_tokens)
            self._draft.hide_error()
            self._enable_fields()
        finally:
            self._updating = False

    def set_default_system_prompt(self, text: str) -> None:
        self._updating = True
        try:
            self.default_system_prompt.setPlainText(text)
        finally:
            self._updating = False

    def set_models(self, entries: list[ModelEntry]) -> None:
        """The models offered for the chat and as draft models."""
        self._updating = True
        try:
            self._entries = list(entries)
            self.model_combo.clear()
            self.model_combo.addItem(self._default_text(), None)
            for entry in entries:
                if entry.path is not None:
                    self.model_combo.addItem(entry.name, entry.path)
            self._draft.set_models(entries)
            select_data(self.model_combo, self._settings.model)
            self._enable_fields()
        finally:
            self._updating = False

    def set_target(self, info: ModelInfo | None) -> None:
        """The engine's default model (what "Default model" means here)."""
        self._target = info
        self.model_combo.setItemText(0, self._default_text())
        self._enable_fields()

    def _refusal(self, method: str) -> str | None:
        return method_refusal(method, self.model_combo.currentData(), self._target, self._entries)

    def _draft_refusal(self, path: str | None) -> str | None:
        return draft_refusal(path, self.model_combo.currentData(), self._target, self._entries)

    def _draft_head(self) -> str | None:
        """The trained draft head of the chat's model, when it has one (known once loaded
        for the engine's default model; from the listing otherwise)."""
        model = self.model_combo.currentData()
        if model is None:
            return self._target.draft_head if self._target is not None else None
        entry = next((e for e in self._entries if e.path == model), None)
        return entry.draft_head if entry is not None else None

    def _default_text(self) -> str:
        name = self._target.name if self._target is not None else None
        return f"{DEFAULT_MODEL_TEXT} ({name})" if name else DEFAULT_MODEL_TEXT

    def show_draft_error(self, message: str) -> None:
        self._draft.show_error(message)

    def choose_draft(self, path: str | None) -> bool:
        """Pick a draft model as the user would; False (and draftRefused) when refused."""
        return self._draft.choose(path)

    # -- internals -----------------------------------------------------------------------------

    def _form(self, card: MetricCard) -> QFormLayout:
        holder = QWidget()
        form = QFormLayout(holder)
        form.setContentsMargins(0, 2, 0, 0)
        form.setHorizontalSpacing(12)
        form.setVerticalSpacing(8)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        card.add_widget(holder)
        return form

    def _align_labels(self) -> None:
        """One label column width for every card, so that the fields line up."""
        labels = [
            form.itemAt(row, QFormLayout.ItemRole.LabelRole).widget()
            for form in self._forms
            for row in range(form.rowCount())
            if form.itemAt(row, QFormLayout.ItemRole.LabelRole) is not None
        ]
        width = max((label.sizeHint().width() for label in labels), default=0)
        for label in labels:
            label.setMinimumWidth(width)

    def _read(self) -> ChatSettings:
        seed = self.seed.text().strip()
        return self._settings.replace(
            model=self.model_combo.currentData(),
            spec_method=self.method.currentData(),
            draft_tokens=self.draft_tokens.value(),
            draft_model=self.draft_model.currentData(),
            ngram_min=self.ngram_min.value(),
            ngram_max=max(self.ngram_min.value(), self.ngram_max.value()),
            temperature=self.temperature.value(),
            top_p=self.top_p.value(),
            top_k=self.top_k.value(),
            min_p=self.min_p.value(),
            repetition_penalty=self.repetition_penalty.value(),
            seed=int(seed) if seed else None,
            max_tokens=self.max_tokens.value(),
        )

    def _edited(self, *_args) -> None:
        if self._updating:
            return
        settings = self._read()
        self._enable_fields()
        if settings != self._settings:
            self._settings = settings
            self.settingsEdited.emit(settings)

    def _prompt_typed(self) -> None:
        if not self._updating:
            self._prompt_timer.start()

    def _emit_default_prompt(self) -> None:
        self.defaultSystemPromptEdited.emit(self.default_system_prompt.toPlainText())

    def _enable_fields(self) -> None:
        """Only the fields the chosen method uses are enabled, with their labels."""
        grey_out(self.method, self._refusal)
        method = self.method.currentData()
        description = SPEC_METHOD_DESCRIPTIONS[method]
        reason = self._refusal(method)
        if reason:  # chosen before the model changed: the engine would refuse it too
            description = f"Not available for this chat's model: {reason}."
        head = self._draft_head()
        if head and method == SpecMethod.DRAFT_MODEL.value:
            description += f" Without a draft model, this model's own {head} guesses ahead."
        self._draft.set_own_head(head)
        self.method_help.setText(description)
        self.method.setToolTip(description)
        fixed_k = method in (
            SpecMethod.DRAFT_MODEL.value,
            SpecMethod.PROMPT_LOOKUP.value,
            SpecMethod.MTP.value,
        )
        uses_draft = method in (SpecMethod.DRAFT_MODEL.value, SpecMethod.AUTO.value)
        uses_ngram = method in (SpecMethod.PROMPT_LOOKUP.value, SpecMethod.AUTO.value)
        form = self._spec_form
        for field, on in (
            (self.draft_tokens, fixed_k),
            (self._draft, uses_draft),
            (self._ngram_row, uses_ngram),
        ):
            form.labelForField(field).setEnabled(on)
        self.draft_tokens.setEnabled(fixed_k)  # auto picks k itself, every round
        self._draft.setEnabled(uses_draft)
        for widget in (self.ngram_min, self.ngram_max, self._ngram_to):
            widget.setEnabled(uses_ngram)

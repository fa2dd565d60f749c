"""The chat settings form (a dock): model, speculation and sampling for the current chat, with
"save as default" for new chats. Every change applies to the chat's next reply at once."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QIntValidator
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.models.model_catalog import ModelEntry, check_draft
from app.settings.chat_settings import MAX_MAX_TOKENS, MAX_NGRAM, SPEC_METHOD_LABELS, ChatSettings
from app.widgets.metric_card import MetricCard
from engine.requests import MAX_DRAFT_TOKENS, ModelInfo, SpecMethod

LOADED_MODEL_TEXT = "Loaded model"
NO_DRAFT_TEXT = "None"


class ChatSettingsForm(QScrollArea):
    settingsEdited = Signal(object)  # ChatSettings, after every accepted change
    saveAsDefault = Signal(object)  # ChatSettings
    resetRequested = Signal()
    draftRefused = Signal(str)  # why the chosen draft model was refused

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setObjectName("PanelScroll")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._settings = ChatSettings()
        self._target: ModelInfo | None = None
        self._updating = False

        body = QWidget()
        body.setObjectName("DockBody")
        layout = QVBoxLayout(body)
        layout.setContentsMargins(12, 4, 12, 12)
        layout.setSpacing(10)

        model_card = MetricCard("Model")
        self.model_combo = QComboBox()
        self.model_combo.setToolTip("The model this chat uses (switching reloads the engine)")
        model_card.add_widget(self.model_combo)
        layout.addWidget(model_card)

        spec_card = MetricCard("Speculative decoding")
        spec_form = self._form(spec_card)
        self._forms = [spec_form]
        self.method = QComboBox()
        for value, label in SPEC_METHOD_LABELS.items():
            self.method.addItem(label, value)
        self.draft_tokens = _spin(1, MAX_DRAFT_TOKENS)
        self.draft_model = QComboBox()
        browse = QToolButton()
        browse.setText("…")
        browse.setToolTip("Choose a draft model folder")
        browse.clicked.connect(self._browse_draft)
        draft_row = QHBoxLayout()
        draft_row.setContentsMargins(0, 0, 0, 0)
        draft_row.addWidget(self.draft_model, 1)
        draft_row.addWidget(browse)
        self.ngram_min = _spin(1, MAX_NGRAM)
        self.ngram_max = _spin(1, MAX_NGRAM)
        ngram_row = QHBoxLayout()
        ngram_row.setContentsMargins(0, 0, 0, 0)
        ngram_row.addWidget(self.ngram_min)
        ngram_row.setSpacing(6)
        ngram_row.addWidget(QLabel("to"))
        ngram_row.addWidget(self.ngram_max)
        spec_form.addRow("Method", self.method)
        spec_form.addRow("Draft tokens (k)", self.draft_tokens)
        spec_form.addRow("Draft model", draft_row)
        spec_form.addRow("N-gram sizes", ngram_row)
        self.draft_error = QLabel()
        self.draft_error.setObjectName("ErrorLabel")
        self.draft_error.setWordWrap(True)
        self.draft_error.setVisible(False)
        spec_card.add_widget(self.draft_error)
        layout.addWidget(spec_card)

        sampling_card = MetricCard("Sampling")
        form = self._form(sampling_card)
        self._forms.append(form)
        self.temperature = _dspin(0.0, 5.0, 0.05)
        self.top_p = _dspin(0.0, 1.0, 0.01)
        self.top_k = _spin(0, 100000)
        self.top_k.setSpecialValueText("off")
        self.min_p = _dspin(0.0, 1.0, 0.01)
        self.repetition_penalty = _dspin(0.5, 3.0, 0.01)
        self.seed = QLineEdit()
        self.seed.setPlaceholderText("random")
        self.seed.setValidator(QIntValidator(0, 2**31 - 1))
        self.max_tokens = _spin(1, MAX_MAX_TOKENS)
        self.max_tokens.setSingleStep(64)
        form.addRow("Temperature", self.temperature)
        form.addRow("Top-p", self.top_p)
        form.addRow("Top-k", self.top_k)
        form.addRow("Min-p", self.min_p)
        form.addRow("Repetition penalty", self.repetition_penalty)
        form.addRow("Seed", self.seed)
        form.addRow("Max tokens", self.max_tokens)
        layout.addWidget(sampling_card)

        buttons = QHBoxLayout()
        save = QPushButton("Save as default")
        save.setToolTip("New chats start with these settings")
        save.clicked.connect(lambda: self.saveAsDefault.emit(self._settings))
        reset = QPushButton("Reset")
        reset.setToolTip("Use the default settings in this chat")
        reset.clicked.connect(self.resetRequested)
        buttons.addWidget(save)
        buttons.addWidget(reset)
        buttons.addStretch(1)
        layout.addLayout(buttons)
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
        for spin in (
            self.draft_tokens,
            self.ngram_min,
            self.ngram_max,
            self.top_k,
            self.max_tokens,
        ):
            spin.valueChanged.connect(self._edited)
        for spin in (self.temperature, self.top_p, self.min_p, self.repetition_penalty):
            spin.valueChanged.connect(self._edited)
        self.method.currentIndexChanged.connect(self._edited)
        self.model_combo.currentIndexChanged.connect(self._edited)
        self.draft_model.currentIndexChanged.connect(self._draft_chosen)
        self.seed.editingFinished.connect(self._edited)
        self._align_labels()
        self.set_settings(ChatSettings())

    # -- public --------------------------------------------------------------------------------

    @property
    def settings(self) -> ChatSettings:
        return self._settings

    def set_settings(self, settings: ChatSettings) -> None:
        self._updating = True
        try:
            self._settings = settings
            _select(self.model_combo, settings.model, LOADED_MODEL_TEXT)
            self.method.setCurrentIndex(max(0, self.method.findData(settings.spec_method)))
            self.draft_tokens.setValue(settings.draft_tokens)
            _select(self.draft_model, settings.draft_model, NO_DRAFT_TEXT)
            self.ngram_min.setValue(settings.ngram_min)
            self.ngram_max.setValue(settings.ngram_max)
            self.temperature.setValue(settings.temperature)
            self.top_p.setValue(settings.top_p)
            self.top_k.setValue(settings.top_k)
            self.min_p.setValue(settings.min_p)
            self.repetition_penalty.setValue(settings.repetition_penalty)
            self.seed.setText("" if settings.seed is None else str(settings.seed))
            self.max_tokens.setValue(settings.max_tokens)
            self.draft_error.setVisible(False)
            self._enable_fields()
        finally:
            self._updating = False

    def set_models(self, entries: list[ModelEntry]) -> None:
        """The models offered for the chat and as draft models."""
        self._updating = True
        try:
            self.model_combo.clear()
            self.model_combo.addItem(LOADED_MODEL_TEXT, None)
            self.draft_model.clear()
            self.draft_model.addItem(NO_DRAFT_TEXT, None)
            for entry in entries:
                if entry.path is not None:
                    self.model_combo.addItem(entry.name, entry.path)
                if entry.location or entry.path:
                    self.draft_model.addItem(entry.name, entry.location or entry.path)
            _select(self.model_combo, self._settings.model, LOADED_MODEL_TEXT)
            _select(self.draft_model, self._settings.draft_model, NO_DRAFT_TEXT)
        finally:
            self._updating = False

    def set_target(self, info: ModelInfo | None) -> None:
        """The loaded model, against which draft models are checked."""
        self._target = info

    def show_draft_error(self, message: str) -> None:
        self.draft_error.setText(message)
        self.draft_error.setVisible(True)

    def choose_draft(self, path: str | None) -> bool:
        """Pick a draft model as the user would; False (and draftRefused) when refused."""
        _select(self.draft_model, path, NO_DRAFT_TEXT)
        return self._settings.draft_model == (path or None)

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

    def _draft_chosen(self, *_args) -> None:
        if self._updating:
            return
        path = self.draft_model.currentData()
        reason = check_draft(self._target, path)
        if reason:
            message = f"Draft model refused: {reason}."
            self.draft_error.setText(message)
            self.draft_error.setVisible(True)
            self._updating = True
            _select(self.draft_model, self._settings.draft_model, NO_DRAFT_TEXT)
            self._updating = False
            self.draftRefused.emit(message)
            return
        self.draft_error.setVisible(False)
        self._edited()

    def _browse_draft(self) -> None:
        dialog = QFileDialog(self, "Choose a draft model folder")
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.fileSelected.connect(self._add_draft_path)
        dialog.open()

    def _add_draft_path(self, path: str) -> None:
        if path and self.draft_model.findData(path) < 0:
            self.draft_model.addItem(path.rstrip("/").rsplit("/", 1)[-1], path)
        self.choose_draft(path)

    def _enable_fields(self) -> None:
        method = self.method.currentData()
        on = method != SpecMethod.OFF.value
        self.draft_tokens.setEnabled(on)
        uses_draft = method in (SpecMethod.DRAFT_MODEL.value, SpecMethod.AUTO.value)
        uses_ngram = method in (SpecMethod.PROMPT_LOOKUP.value, SpecMethod.AUTO.value)
        self.draft_model.setEnabled(uses_draft)
        self.ngram_min.setEnabled(uses_ngram)
        self.ngram_max.setEnabled(uses_ngram)


FIELD_MIN_WIDTH = 64  # below their size hints, so that the dock may be narrow


def _spin(low: int, high: int) -> QSpinBox:
    spin = QSpinBox()
    spin.setRange(low, high)
    spin.setKeyboardTracking(False)
    spin.setMinimumWidth(FIELD_MIN_WIDTH)
    return spin


def _dspin(low: float, high: float, step: float) -> QDoubleSpinBox:
    spin = QDoubleSpinBox()
    spin.setRange(low, high)
    spin.setSingleStep(step)
    spin.setDecimals(2)
    spin.setKeyboardTracking(False)
    spin.setMinimumWidth(FIELD_MIN_WIDTH)
    return spin


def _select(combo: QComboBox, value: str | None, none_text: str) -> None:
    index = combo.findData(value) if value else 0
    if index < 0 and value:
        combo.addItem(value.rstrip("/").rsplit("/", 1)[-1], value)
        index = combo.count() - 1
    combo.setCurrentIndex(max(index, 0))

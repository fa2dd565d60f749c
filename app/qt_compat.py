"""Work-arounds for bugs in the Qt bindings we pin.

PySide6 6.12.0 (its abi3 wheels) on Python < 3.12 hands out references to the singletons it
returns without taking them: every call of a void method (`widget.setText(...)`,
`QCoreApplication.processEvents()`) drops a reference to `None`, and every `Signal.emit()` one
to `True`. Python 3.12+ makes these objects immortal, so there nothing happens; on 3.11 the
counts drain as the GUI runs until CPython aborts with "Fatal Python error: none_dealloc" (or
bool_dealloc), at the latest when the interpreter exits. We do what 3.12 does: give None, True
and False a reference count that no program can exhaust. Measured here: both leaks are exactly
one reference per call (see `binding_leaks`).
"""

from __future__ import annotations

import ctypes
import sys

_HEADROOM = 1 << 40  # calls needed before a count could reach zero again
_SINGLETONS = (None, True, False)
_done = False


def binding_leaks() -> dict[str, int]:
    """References lost per 100 calls, by kind: {"void call -> None": n, "emit -> True": n}."""
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        ping = Signal()

    probe = _Probe()
    before = sys.getrefcount(None)
    for _ in range(100):
        probe.setObjectName("probe")
    none_lost = before - sys.getrefcount(None)
    before = sys.getrefcount(True)
    for _ in range(100):
        probe.ping.emit()
    true_lost = before - sys.getrefcount(True)
    return {"void call -> None": none_lost, "emit -> True": true_lost}


def protect_singleton_refcounts() -> bool:
    """Make None, True and False practically immortal on Python < 3.12; True if done now."""
    global _done
    if _done or sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    for value in _SINGLETONS:
        ctypes.c_ssize_t.from_address(id(value)).value += _HEADROOM
    _done = True
    return True

"""Python's cyclic garbage collector runs on the GUI thread only (app/gui_gc.py): a cycle that
holds a Qt object, dropped while the MLX thread allocates, must not be destroyed there."""

from __future__ import annotations

import gc
import threading

from apphelpers import spin
from PySide6.QtCore import QObject

from app.gui_gc import GuiThreadCollector


class _Cycle:
    """A reference cycle around a QObject that records the thread that finalised it."""

    def __init__(self, finalised_on: list[str]) -> None:
        self.me = self
        self.qobject = QObject()
        self.finalised_on = finalised_on

    def __del__(self) -> None:
        self.finalised_on.append(threading.current_thread().name)


def _drop_a_cycle_then_allocate_on_a_worker(kept: list) -> list[str]:
    """Drop a cycle, then allocate enough containers on another thread (kept alive in
    `kept`) to trip the collector's thresholds there, as the MLX thread does building steps."""
    finalised_on: list[str] = []
    _Cycle(finalised_on)

    def allocate() -> None:
        kept.extend([] for _ in range(20_000))

    worker = threading.Thread(target=allocate, name="mlx-like")
    worker.start()
    worker.join()
    return finalised_on


def test_without_it_a_worker_thread_collects_cycles_that_hold_qt_objects():
    """The hazard (CPython's own trigger), so the test below means something."""
    assert not gc.isenabled()  # the package's collector (conftest) has taken over
    gc.enable()
    try:
        gc.collect()
        assert _drop_a_cycle_then_allocate_on_a_worker([]) == ["mlx-like"]
    finally:
        gc.disable()


def test_cycles_die_on_the_gui_thread_on_the_timer(qapp, package_collector):
    # The package's collector, on the same thread, would otherwise race this one to the cycle.
    package_collector.stop()
    collector = GuiThreadCollector(interval_ms=20)
    collector.start()
    try:
        gc.collect()
        finalised_on = _drop_a_cycle_then_allocate_on_a_worker(kept := [])
        assert finalised_on == []  # the worker did not collect it
        assert spin(lambda: finalised_on, 5.0)
        assert finalised_on == [threading.current_thread().name]
        assert threading.current_thread() is threading.main_thread()
        assert collector.collections >= 1
        del kept
    finally:
        collector.stop()
        package_collector.start()


def test_start_and_stop_restore_the_collector_as_it_was():
    gc.enable()
    try:
        collector = GuiThreadCollector()
        collector.start()
        assert not gc.isenabled() and collector.running
        collector.start()  # twice is once
        collector.stop()
        assert gc.isenabled() and not collector.running
        collector.stop()  # and stopping twice too
        assert gc.isenabled()
    finally:
        gc.disable()  # back to the package's collector


def test_collect_due_follows_cpythons_thresholds():
    collector = GuiThreadCollector()
    gc.collect()
    assert collector.collect_due() == 0 and collector.collections == 0  # nothing is due
    keep = [[] for _ in range(gc.get_threshold()[0] + 10)]
    collector.collect_due()
    assert collector.collections == 1 and gc.get_count()[0] < 10
    del keep

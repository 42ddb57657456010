"""The forked worker the exports use to share two cores: values, errors and deaths come back."""
from __future__ import annotations

import os
import threading

import pytest

from msprof_kit.errors import NoData
from msprof_kit.forked import Forked, WorkerDied, can_fork

pytestmark = pytest.mark.skipif(not can_fork(), reason="no fork on this platform")


def test_the_value_comes_back_and_the_work_ran_in_another_process():
    parent = os.getpid()
    assert Forked(lambda: (os.getpid() != parent, [1, 2, 3]), "test").result() == (True, [1, 2, 3])


def test_an_error_is_raised_in_the_parent_with_its_message():
    def fail():
        raise NoData("nothing there", path="/some/file", offset=16)

    with pytest.raises(NoData, match="/some/file: offset 16: nothing there") as info:
        Forked(fail, "test").result()
    assert info.value.exit_code == 4


def test_an_error_that_cannot_be_pickled_is_reported_by_name():
    class Local(Exception):  # a local class does not pickle
        pass

    def fail():
        raise Local("odd")

    with pytest.raises(WorkerDied, match="Local: odd"):
        Forked(fail, "test").result()


def test_a_worker_that_dies_is_an_error_naming_it():
    with pytest.raises(WorkerDied, match="the layers worker process ended without a result"):
        Forked(lambda: os._exit(3), "layers").result()


def test_cancel_stops_a_running_worker():
    started = Forked(lambda: threading.Event().wait(60), "sleeper")
    assert isinstance(started.cancel(), int)
    assert started.cancel() is None

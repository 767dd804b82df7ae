"""Bounded work measured by the work itself, not by the clock.

A test that input is refused before it is expanded, walked or multiplied cannot say so with a wall-clock
bound: on a loaded 2-core machine a bound of seconds is missed by honest code. What the
code does is the same on any machine: the number of function calls it makes for one input. sys.setprofile
sees every Python and C function call in this thread (Python docs, sys.setprofile), so the count is exact
and repeatable; a budget some ten times what the refusal takes today still fails, by orders of magnitude,
code that expands an alias bomb or walks 100,000,000 replicas.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


class _OverBudget(BaseException):
    """Raised inside the code under test: a BaseException, so its own `except Exception` cannot swallow it."""


class _Counter:
    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.calls = 0

    def __call__(self, _frame, event: str, _arg) -> None:
        if event in ("call", "c_call"):
            self.calls += 1
            if self.calls > self.budget:
                sys.setprofile(None)  # stop counting before raising, so the failure itself is not counted
                raise _OverBudget


@contextmanager
def work_budget(calls: int) -> Iterator[_Counter]:
    """Fail the test (AssertionError) as soon as the code inside makes more than `calls` function calls; the
    counter says how many it made."""
    counter = _Counter(calls)
    previous = sys.getprofile()
    sys.setprofile(counter)
    try:
        yield counter
    except _OverBudget:
        raise AssertionError(f"more than {calls} function calls: the input was not refused before the work") from None
    finally:
        sys.setprofile(previous)

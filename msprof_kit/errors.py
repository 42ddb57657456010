"""The one exception tree of msprof-kit, and the warnings collected while working.

The library raises these and never prints; the CLI turns them into one line and an exit code.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, List, Optional


class MsprofKitError(Exception):
    """Base of every error msprof-kit raises on purpose. `exit_code` is what the CLI returns."""

    exit_code = 1

    def __init__(self, message: str, path: Optional[str] = None, offset: Optional[int] = None) -> None:
        self.path = path
        self.offset = offset
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = f"{self.path}: " if self.offset is None else f"{self.path}: offset {self.offset}: "
        return f"{where}{self.message}"


class PathNotFound(MsprofKitError):
    exit_code = 2


class NotACollection(MsprofKitError):
    exit_code = 2


class UnreadableFile(MsprofKitError):
    exit_code = 2


class MissingControlFile(MsprofKitError):
    exit_code = 3


class BadControlFile(MsprofKitError):
    exit_code = 3


class UnknownChip(MsprofKitError):
    exit_code = 3


class NoData(MsprofKitError):
    exit_code = 4


class BadOption(MsprofKitError):
    exit_code = 1


class StoreError(MsprofKitError):
    exit_code = 5


class InvalidIteration(BadOption):
    """An iteration range outside the model's iterations (the reference's INVALID_STEP_TRACE code)."""

    exit_code = 9


@dataclass
class Diagnostics:
    """Warnings gathered during one command: each names the file, offset and what was dropped."""

    warnings: List[str] = field(default_factory=list)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def extend(self, messages: Iterable[object]) -> None:
        for m in messages:
            self.warn(str(m))

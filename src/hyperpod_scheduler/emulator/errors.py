"""Errors the emulator's domain model raises; the protocol layer turns them into AWS JSON errors."""

from __future__ import annotations


class EmulatorError(Exception):
    """An AWS-shaped error: ``code`` is the ``__type`` the client sees, ``status`` the HTTP status."""

    def __init__(self, code: str, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status


def validation(message: str) -> EmulatorError:
    return EmulatorError("ValidationException", message, 400)


def not_found(message: str) -> EmulatorError:
    return EmulatorError("ResourceNotFound", message, 400)


def conflict(message: str) -> EmulatorError:
    return EmulatorError("ConflictException", message, 400)


def limit_exceeded(message: str) -> EmulatorError:
    return EmulatorError("ResourceLimitExceeded", message, 400)


def in_use(message: str) -> EmulatorError:
    return EmulatorError("ResourceInUse", message, 400)


def throttled(message: str = "Rate exceeded") -> EmulatorError:
    return EmulatorError("ThrottlingException", message, 400)

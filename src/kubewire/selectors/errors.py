"""``SelectorError``: the one error that label and field selector parsing and conversion raise."""

from __future__ import annotations


class SelectorError(ValueError):
    """A selector kube-apiserver would reject; ``message`` is its exact error text.

    The server answers it as a 400 BadRequest.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

"""The exceptions the client raises.

The server answers every error with an RFC 9457 ``application/problem+json``
document; :class:`ProblemError` carries its fields. A server that cannot be
reached at all is a different failure (retry later, check the address), so
it has its own exception, :class:`UnreachableError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from .views import BatchStatus, Job

# Longest piece of a non-problem error body quoted in a message: a proxy's
# HTML error page should not flood a traceback.
_QUOTED_BODY_CHARS = 200


class McqError(Exception):
    """Base class of every exception this package raises."""


@dataclass(frozen=True)
class FieldError:
    """One bad value of a request, as listed by a validation problem."""

    pointer: str
    """RFC 6901 JSON pointer into the request body, e.g. ``/jobs/17/down``."""
    detail: str
    """What is wrong with the value and how to fix it."""


class ProblemError(McqError):
    """The server refused a request or failed on it (any 4xx or 5xx answer).

    The attributes come from the problem document: ``type`` is stable and
    meant for programs (``/problems/invalid-spec``, ``/problems/not-found``,
    …, see docs/api.md), ``detail`` is for people, and ``errors`` lists each
    bad value of a request by JSON pointer. An error answer that is not a
    problem document (a proxy's page, say) has ``type`` ``about:blank``, as
    RFC 9457 prescribes, and the start of the body as ``detail``.
    """

    status: int
    """HTTP status code."""
    type: str
    """Stable identifier of the kind of problem."""
    title: str
    """Short summary of the kind of problem."""
    detail: str
    """What went wrong with this request."""
    errors: list[FieldError]
    """Each bad value, for validation problems; empty otherwise."""

    def __init__(
        self,
        status: int,
        type: str,
        title: str,
        detail: str,
        errors: list[FieldError] | None = None,
    ) -> None:
        self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.errors = list(errors or [])
        super().__init__(self._message())

    @classmethod
    def from_response(cls, response: httpx.Response) -> ProblemError:
        """Reads the problem document of an error answer."""
        body: Any
        try:
            body = json.loads(response.content)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            text = response.text.strip()[:_QUOTED_BODY_CHARS]
            reason = response.reason_phrase or "error"
            return cls(response.status_code, "about:blank", reason, text or reason)
        errors = [
            FieldError(pointer=str(item.get("pointer", "")), detail=str(item.get("detail", "")))
            for item in body.get("errors") or []
            if isinstance(item, dict)
        ]
        status = body.get("status")
        return cls(
            status=status if isinstance(status, int) else response.status_code,
            type=str(body.get("type", "about:blank")),
            title=str(body.get("title", response.reason_phrase)),
            detail=str(body.get("detail", "")),
            errors=errors,
        )

    def _message(self) -> str:
        message = f"{self.status} {self.title}: {self.detail}"
        for error in self.errors:
            message += f"\n  {error.pointer}: {error.detail}"
        return message


class UnreachableError(McqError, ConnectionError):
    """The server could not be reached, or the connection failed before it
    answered (refused, reset, timed out). Nothing is known about whether a
    submission sent at that moment arrived: resend it with the same
    idempotency key to be sure it is enqueued once."""


class WaitTimeout(McqError, TimeoutError):
    """:meth:`Client.wait` ran out of time before the work finished."""

    view: Job | BatchStatus
    """The last view read: the work as it stood when the time ran out."""

    def __init__(self, message: str, view: Job | BatchStatus) -> None:
        super().__init__(message)
        self.view = view

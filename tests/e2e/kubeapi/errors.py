"""Errors answered as Kubernetes `Status` objects (kind: Status, apiVersion: v1)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    500: "InternalError",
}


@dataclass(frozen=True)
class Cause:
    """One entry of `details.causes` (e.g. reason FieldValueRequired, field spec.image)."""

    reason: str
    message: str
    field: str = ""

    def to_json(self) -> JSON:
        out: JSON = {"reason": self.reason, "message": self.message}
        if self.field:
            out["field"] = self.field
        return out


@dataclass
class ApiError(Exception):
    """An error the API server answers with a `Status` body and the same HTTP code."""

    code: int
    message: str
    reason: str = ""
    name: str = ""
    group: str = ""
    kind: str = ""  # the resource (plural) for most errors, as the real server puts it
    causes: list[Cause] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.reason:
            self.reason = REASONS.get(self.code, "Unknown")
        super().__init__(self.message)

    def status(self) -> JSON:
        details: JSON = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [c.to_json() for c in self.causes]
        out: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if details:
            out["details"] = details
        return out


def qualified(plural: str, group: str) -> str:
    """`configmaps`, `statefulsets.apps`: how the server names a resource in messages."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        404, f'{qualified(plural, group)} "{name}" not found', name=name, group=group, kind=plural
    )


def already_exists(plural: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        f'{qualified(plural, group)} "{name}" already exists',
        reason="AlreadyExists",
        name=name,
        group=group,
        kind=plural,
    )


def conflict(plural: str, group: str, name: str, why: str = "") -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {why}',
        reason="Conflict",
        name=name,
        group=group,
        kind=plural,
    )


@dataclass(frozen=True)
class FieldError:
    """A field-level validation error, formatted like apimachinery's field.Error."""

    field: str
    type: str  # Required, Invalid, Unsupported value, Forbidden, Too long, Too many, Duplicate value
    detail: str = ""
    value: Any = None
    has_value: bool = False

    REASONS = {
        "Required value": "FieldValueRequired",
        "Invalid value": "FieldValueInvalid",
        "Unsupported value": "FieldValueNotSupported",
        "Forbidden": "FieldValueForbidden",
        "Too long": "FieldValueTooLong",
        "Too many": "FieldValueTooMany",
        "Duplicate value": "FieldValueDuplicate",
        "Not found": "FieldValueNotFound",
    }

    def body(self) -> str:
        """The message without the field prefix, e.g. `Invalid value: -1: must be >= 0`."""
        text = self.type
        if self.has_value:
            text += f": {go_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}" if self.field else self.body()

    def cause(self) -> Cause:
        return Cause(self.REASONS.get(self.type, "FieldValueInvalid"), self.body(), self.field)


def go_value(value: Any) -> str:
    """Render a value as apimachinery's field errors do (%q for strings, %v otherwise)."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_value(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_value(v) for v in value) + "]"
    return str(value)


def invalid(kind: str, group: str, name: str, errors: list[FieldError]) -> ApiError:
    """422 Invalid, as `Kind.group "name" is invalid: [a: ..., b: ...]`."""
    qual = f"{kind}.{group}" if group else kind
    text = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    return ApiError(
        422,
        f'{qual} "{name}" is invalid: {text}',
        reason="Invalid",
        name=name,
        group=group,
        kind=kind,
        causes=[e.cause() for e in errors],
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)

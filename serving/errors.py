"""OpenAI-style error responses: ``{"error": {"message", "type", "param", "code"}}``."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

__all__ = ["ApiError", "error_body", "error_response", "validation_error"]

_TYPES = {400: "invalid_request_error", 404: "not_found_error", 429: "rate_limit_error",
          500: "internal_error", 503: "service_unavailable"}


class ApiError(Exception):
    """An error answered with ``status`` and an OpenAI-style body naming ``param`` where one is at fault."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


def error_body(status: int, message: str, *, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": _TYPES.get(status, "error"), "param": param,
                      "code": code if code is not None else str(status)}}


def error_response(exc: ApiError) -> JSONResponse:
    return JSONResponse(error_body(exc.status, exc.message, param=exc.param, code=exc.code), status_code=exc.status)


def validation_error(errors: list[dict[str, Any]]) -> ApiError:
    """A 400 from pydantic's errors: the first one, its field path as ``param``."""
    if not errors:
        return ApiError(400, "the request body is invalid")
    first = errors[0]
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    if first.get("type") == "json_invalid":
        detail = first.get("ctx", {}).get("error") or first.get("msg", "")
        return ApiError(400, f"the request body is not valid JSON ({detail})", code="json_invalid")
    # union members add their type names to the path ("prompt.str"); the field is what the client knows
    param = ".".join(p for p in loc if p in _field_names(loc)) or None
    message = first.get("msg", "invalid value")
    if message.startswith("Value error, "):
        message = message.removeprefix("Value error, ")
    where = f"{param}: " if param else ""
    return ApiError(400, f"{where}{message}", param=param, code="invalid_value")


def _field_names(loc: list[str]) -> set[str]:
    """Path parts that are field names, not pydantic's union-member tags (which contain '[' or are type names)."""
    tags = {"str", "int", "float", "bool", "list", "dict", "function-after", "json-or-python"}
    return {p for p in loc if p not in tags and "[" not in p}

"""OpenAI-style errors: an HTTP status and a JSON body `{"error": {message, type, param, code}}`."""

from __future__ import annotations

from typing import Any

from aiohttp import web

INVALID_REQUEST = "invalid_request_error"
AUTHENTICATION = "authentication_error"
SERVER_ERROR = "server_error"


class ApiError(Exception):
    """A request the server refuses or could not serve, as OpenAI's API reports it."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        kind: str = INVALID_REQUEST,
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.kind = kind
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return error_body(self.message, kind=self.kind, param=self.param, code=self.code)

    def response(self) -> web.Response:
        return web.json_response(self.body(), status=self.status)


def error_body(
    message: str, *, kind: str = INVALID_REQUEST, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}

"""Every answer of the embedded cluster's HTTP servers is a metav1.Status, never aiohttp's own error
page: the API server and the Trainer's status server wrap their handlers in `status_errors`.

A refusal the handler raised (ApiError) is its Status; an HTTP error aiohttp raised (a body too
large, a request it cannot read) keeps its code as a Status; anything else is a bug, logged whole
and answered 500 InternalError as kube-apiserver answers an unexpected error
(apimachinery's errors.NewInternalError: "Internal error occurred: ...").
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable

from aiohttp import web

from backend.local.registry.status import ApiError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def status_response(error: ApiError) -> web.Response:
    return web.json_response(error.status(), status=error.code)


def status_errors(log: logging.Logger, refusal: Callable[[web.HTTPException], ApiError]) -> Callable:
    """The middleware; `refusal(exc)`: the Status for an HTTP error aiohttp raised."""

    @web.middleware
    async def answer(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as exc:
            return status_response(exc)
        except web.HTTPException as exc:
            if exc.status < 400:  # a redirect or success raised on purpose
                raise
            return status_response(refusal(exc))
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug: answered as upstream does, logged whole
            log.exception("%s %s failed", request.method, request.path)
            return status_response(ApiError(500, "InternalError",
                                            f"Internal error occurred: {type(exc).__name__}: {exc}"))

    return answer


def http_refusal(exc: web.HTTPException) -> ApiError:
    """An aiohttp HTTP error as a Status with its code and its reason phrase."""
    return ApiError(exc.status, exc.reason.replace(" ", ""), exc.text or exc.reason)

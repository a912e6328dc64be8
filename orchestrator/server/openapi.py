"""The OpenAPI 3.1 description of the API, served at ``/openapi.json``.

Built from the same pydantic models that validate the bodies, so what is documented is what is
enforced; the paths are written out here because there are few and each deserves a sentence.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from baton.server.schemas import (
    Answered,
    Cancelled,
    Decided,
    Decision,
    ErrorBody,
    Posted,
    PostMessage,
    Profiles,
    QuestionAnswer,
    Started,
    StartSession,
)
from baton.server.state import SessionList, SessionState

MODELS: tuple[type[BaseModel], ...] = (
    StartSession,
    Started,
    PostMessage,
    Posted,
    Decision,
    Decided,
    QuestionAnswer,
    Answered,
    Cancelled,
    Profiles,
    SessionList,
    SessionState,
    ErrorBody,
)
Json = dict[str, Any]


def _ref(model: type[BaseModel]) -> Json:
    return {"$ref": f"#/components/schemas/{model.__name__}"}


def _body(model: type[BaseModel]) -> Json:
    return {"required": True, "content": {"application/json": {"schema": _ref(model)}}}


def _answer(description: str, model: type[BaseModel] | None = None) -> Json:
    answer: Json = {"description": description}
    if model is not None:
        answer["content"] = {"application/json": {"schema": _ref(model)}}
    return answer


def _errors(*codes: int) -> Json:
    text = {
        401: "no token, or one the server does not know",
        403: "a session token outside its session, or a read-only one that posts",
        503: "a session token could not be checked: the bus does not answer",
        404: "no such session (or call, or question)",
        409: "already decided or answered (an approval, a question), expired (a question), the "
        "session finished (a message), or it signs with a key this server lacks",
        413: "body over the size limit (an upload: over the upload limit)",
        415: "body not JSON (nor multipart, for an answer to a question)",
        422: "body invalid",
    }
    return {str(code): _answer(text[code], ErrorBody) for code in codes}


SESSION = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}


def _paths() -> Json:
    return {
        "/sessions": {
            "get": {
                "summary": "List sessions on the bus, newest first",
                "parameters": [
                    {
                        "name": "limit",
                        "in": "query",
                        "schema": {"type": "integer", "minimum": 1, "maximum": 200},
                    }
                ],
                "responses": {
                    "200": _answer("the sessions", SessionList),
                    **_errors(401, 403, 422, 503),
                },
            },
            "post": {
                "summary": "Start a session (it runs in the server); returns its id",
                "requestBody": _body(StartSession),
                "responses": {
                    "201": _answer("started", Started),
                    **_errors(401, 403, 413, 415, 422, 503),
                },
            },
        },
        "/sessions/{id}/state": {
            "get": {
                "summary": "A session's state, folded from its event log",
                "parameters": [SESSION],
                "responses": {
                    "200": _answer("its state", SessionState),
                    **_errors(401, 403, 404, 503),
                },
            }
        },
        "/sessions/{id}/events": {
            "get": {
                "summary": "The session's events as Server-Sent Events, resumable",
                "description": "id = event-log cursor, event = its type, data = its JSON. Resume "
                "with Last-Event-ID (or ?last_event_id=). Heartbeat comment every 15 s. The "
                "stream ends after session.finished; reconnecting after it answers 204.",
                "parameters": [
                    SESSION,
                    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
                    {"name": "last_event_id", "in": "query", "schema": {"type": "string"}},
                ],
                "responses": {
                    "200": {
                        "description": "the stream",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    "204": {"description": "the session finished before that cursor"},
                    **_errors(401, 403, 404, 503),
                },
            }
        },
        "/sessions/{id}/messages": {
            "post": {
                "summary": "Post a message to the lead (a follow-up) or a sub-agent",
                "parameters": [SESSION],
                "requestBody": _body(PostMessage),
                "responses": {
                    "202": _answer("on the bus", Posted),
                    **_errors(401, 403, 404, 409, 413, 415, 422, 503),
                },
            }
        },
        "/sessions/{id}/approvals/{call_id}": {
            "post": {
                "summary": "Approve or decline a pending tool call",
                "parameters": [
                    SESSION,
                    {
                        "name": "call_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                ],
                "requestBody": _body(Decision),
                "responses": {
                    "200": _answer("answered", Decided),
                    **_errors(401, 403, 404, 409, 413, 415, 422, 503),
                },
            }
        },
        "/sessions/{id}/questions/{question_id}": {
            "post": {
                "summary": "Answer a question an agent asks: an approval, a file, an image",
                "description": "JSON (exactly one of approved, url, media, cancel), or "
                "multipart/form-data with one part named file: stored in the server's media "
                "store, and the agent gets its URL. Refused (nothing stored or sent): a file over "
                "the upload limit (413) or of a type the question does not accept (422), an "
                "unknown question (404), one already answered or expired (409).",
                "parameters": [
                    SESSION,
                    {
                        "name": "question_id",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string"},
                    },
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {"schema": _ref(QuestionAnswer)},
                        "multipart/form-data": {
                            "schema": {
                                "type": "object",
                                "required": ["file"],
                                "properties": {"file": {"type": "string", "format": "binary"}},
                            }
                        },
                    },
                },
                "responses": {
                    "200": _answer("answered", Answered),
                    **_errors(401, 403, 404, 409, 413, 415, 422, 503),
                },
            }
        },
        "/sessions/{id}/cancel": {
            "post": {
                "summary": "Cancel a session this server runs",
                "parameters": [SESSION],
                "responses": {
                    "202": _answer("cancelling", Cancelled),
                    **_errors(401, 403, 404, 503),
                },
            }
        },
        "/profiles": {
            "get": {
                "summary": "The sub-agent profiles sessions can use",
                "responses": {"200": _answer("profiles", Profiles), **_errors(401, 403, 503)},
            }
        },
        "/media/{path}": {
            "get": {
                "summary": "A file a sub-agent tool wrote (under the media directory only)",
                "parameters": [
                    {"name": "path", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {"200": {"description": "the file"}, **_errors(401, 403, 404, 503)},
            }
        },
    }


@cache
def openapi_document() -> Json:
    _, schemas = models_json_schema(
        [(model, "validation") for model in MODELS],
        ref_template="#/components/schemas/{model}",
    )
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "baton",
            "version": "1",
            "description": "Start sessions, post to them, answer approvals, stream their events. "
            "Every route takes a token (bearer, ?token= or the baton_token cookie): the server's "
            "admin token opens all of them; a session token (the tokens of POST /sessions) opens "
            "only its session's page, state, events and media, and with the write scope its "
            "messages, answers to its questions and cancel; elsewhere it gets 403.",
        },
        "paths": _paths(),
        "components": {
            "schemas": schemas.get("$defs", {}),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "query": {"type": "apiKey", "in": "query", "name": "token"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": "baton_token"},
            },
        },
        "security": [{"bearer": []}, {"query": []}, {"cookie": []}],
    }

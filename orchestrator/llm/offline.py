"""The offline model: a built-in, deterministic model for running baton with no API key.

It is the scripted server (:mod:`baton.llm.scripted`) with a responder that reads each
request and answers as a lead or as a sub-agent would, served through the in-process transport so
the real ``openai`` client path runs (streaming, tool-call deltas split across chunks, usage). Its
model name is :data:`OFFLINE_MODEL_NAME` and :data:`OFFLINE_LABEL` says what it is; show the label
wherever the offline model is in use.

**Which script answers** (first rule that decides wins):

1. a marker in a system/developer message: ``[baton:lead]`` or ``[baton:subagent]``;
2. the ``send_message`` tool's ``type`` parameter: an ``enum`` containing ``"task"`` → lead,
   any other ``enum`` → sub-agent;
3. its ``to`` parameter: an ``enum`` of exactly ``["lead"]`` → sub-agent;
4. no ``send_message`` tool offered → sub-agent; otherwise → lead.

**Lead script.** The *request* is the latest user message that is not an inbox block (below).

* Nothing answered since the request: split it into sub-tasks (on newlines, ``;``, ``,``, and the
  words "and"/"then"; a sub-task that starts with an article or a number, "a heron", has no verb
  of its own and takes the one before it: "paint a fox and a heron" is two paintings) and call
  ``send_message(to=<agent>, content=<sub-task>, type="task")`` once per sub-task, all in
  parallel, to the agent whose name the sub-task's words start like ("paint a fox" →
  ``painter``, "publish a haiku" → ``publisher``), else round-robin from the ``to`` parameter's
  ``enum`` (``"lead"``/``"user"`` left out, and agents only a name reaches:
  :data:`BY_NAME_ONLY`) or ``"worker"`` when there is none. No ``send_message`` tool: it
  answers with text.
* Delegated, no results yet: "Delegated N task(s) (…); waiting for results.", counting only the
  sends that went out (a send the lead refused is no task), in the singular for one.
* Results in the context since the request: a summary naming each agent that reported, saying
  which started agents are still outstanding, if any, and listing every media URL of the whole
  conversation (its results' ``media:`` lines: a follow-up's answer lists the first request's
  pictures too, and a URL an agent's words mention is not listed).

It answers the way the lead asks: through the ``answer`` tool when one is offered and calls are
allowed (``answer(text, status="done", media=[every media URL])``, its text streamed in pieces),
else as plain text.

**Inbox blocks — the format the lead's context must use for sub-agent messages.** Each message is a
block in a ``user`` (or ``tool``) message, several blocks per message allowed, separated by a blank
line; its first line is ``[<type> from <sender>]`` followed by the content, and media URLs
(``http(s)://``, ``file://``, ``data:``) anywhere in the block, conventionally on a last line
``media: <url> <url> ...``::

    [result from painter] Painted a red fox in the snow.
    media: https://cdn.example/fox.png

**Sub-agent script.** Its task is the latest user message (an inbox header such as
``[task from lead]`` is stripped; an image ``describe_image`` attached is no task). It calls, in
parallel, every offered tool other than ``send_message`` that takes a single string parameter,
with the task text (and ``describe_image``, whose two parameters are optional, with the task as
its ``prompt``: it asks a person for the image); once their results are back it calls
``send_message(to="lead", type="result", content=<summary with every URL found in the tool
results>)``, or saying what did not run or failed and why when a call was refused (a declined
approval, a file nobody uploaded) or failed (the tool's error, as the engine reports it); after
that, or with no such tools, it answers with text. A writing task ("write a haiku") is answered
with a canned text rather than "Done: …". A tool result that is a JSON object (an MCP tool's
data, such as the time in a zone) is quoted on the summary's first line, which the
lead's summary quotes in turn.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any, Literal

from baton.llm.client import ModelSettings, OpenAIChatModel
from baton.llm.script import Call, Json, Reply, pieces
from baton.llm.scripted import IN_PROCESS_URL, ScriptedServer

OFFLINE_MODEL_NAME = "baton-offline"
OFFLINE_LABEL = "offline model (built-in and scripted: no API key configured, answers are canned)"
LEAD_MARKER = "[baton:lead]"
SUBAGENT_MARKER = "[baton:subagent]"
DEFAULT_AGENT = "worker"

_INBOX_HEADER = re.compile(r"^\[(?P<type>[\w-]+) from (?P<sender>[^\]]+)\]\s*", re.MULTILINE)
_URL = re.compile(r"(?:https?|file)://[^\s<>\"'()\[\],]+|data:[\w.+-]+/[\w.+-]+;base64,[\w+/=]+")
_SPLIT = re.compile(r"\s*(?:\n|;|,|\band\b|\bthen\b)\s*", re.IGNORECASE)
_ARG_PIECE = 16
BY_NAME_ONLY = ("publisher", "reviewer")
"""Agents whose work waits on a person (the built-in ``publisher`` needs an approval, the
``reviewer`` a file): they get a task only when its words name them ("publish a haiku", "review
my notes"), never one dealt round-robin, which would end up waiting for a question the user never
meant to be asked."""


def offline_model(*, chunk_delay: float = 0.0) -> OpenAIChatModel:
    """An :class:`OpenAIChatModel` answered by the offline scripts, in-process."""
    server = offline_server(chunk_delay=chunk_delay)
    settings = ModelSettings(
        model=OFFLINE_MODEL_NAME, base_url=IN_PROCESS_URL, api_key="offline", max_retries=0
    )
    return OpenAIChatModel(settings, http_client=server.http_client())


def offline_server(*, chunk_delay: float = 0.0, record: bool = False) -> ScriptedServer:
    """The scripted server with the offline responder (mount it in-process or on loopback);
    ``record`` keeps every request for a test to read (a long-lived model must not)."""

    def responder(body: Json) -> Reply:
        reply = offline_reply(body)
        if chunk_delay:
            return _with_delay(reply, chunk_delay)
        return reply

    return ScriptedServer(responder=responder, record=record)


def is_offline(model_name: str) -> bool:
    return model_name == OFFLINE_MODEL_NAME


def offline_reply(body: Json) -> Reply:
    """The offline answer to one Chat Completions request body (a pure function of it)."""
    messages: list[Json] = list(body.get("messages", []))
    tools: list[Json] = list(body.get("tools", []))
    if role_of(messages, tools) == "lead":
        return _lead(body, messages, tools)
    return _subagent(messages, tools)


def role_of(messages: list[Json], tools: list[Json]) -> Literal["lead", "subagent"]:
    """Which script answers; the rule is in the module docstring."""
    system = "\n".join(_text(m) for m in messages if m.get("role") in ("system", "developer"))
    if LEAD_MARKER in system:
        return "lead"
    if SUBAGENT_MARKER in system:
        return "subagent"
    send = _tool(tools, "send_message")
    if send is None:
        return "subagent"
    type_enum = _param(send, "type").get("enum")
    if type_enum:
        return "lead" if "task" in type_enum else "subagent"
    if _param(send, "to").get("enum") == ["lead"]:
        return "subagent"
    return "lead"


# --- the lead ---------------------------------------------------------------------------------


def _lead(body: Json, messages: list[Json], tools: list[Json]) -> Reply:
    request_at = _request_index(messages)
    request = _strip_header(_text(messages[request_at])) if request_at >= 0 else ""
    since = messages[request_at + 1 :]
    send = _tool(tools, "send_message")
    reply = _answerer(body, tools, len(messages))
    started = _started(since)
    reports = [block for message in since for block in _inbox_blocks(message)]
    results = [(sender, text) for kind, sender, text in reports if kind == "result"]
    every = [text for m in messages for kind, _, text in _inbox_blocks(m) if kind == "result"]
    media = list(dict.fromkeys(url for text in every for url in _media_line_urls(text)))
    if not any(m.get("role") == "assistant" for m in since):
        if send is None:
            return reply(f"Offline model: no send_message tool to delegate; request: {request}")
        return _delegate(request, _agents(send), len(messages))
    if send is not None and (held := _held_back(since)):
        return _send_calls(held, len(messages))  # "send this then if it is still needed": it is
    if results:
        return reply(_summary(results, started, media))
    names = ", ".join(dict.fromkeys(started)) or "nobody"
    tasks = "task" if len(started) == 1 else "tasks"
    return reply(f"Delegated {len(started)} {tasks} ({names}); waiting for results.")


_STARTED = re.compile(r"^(?:Started (\S+), a new |.*? so (\S+) \(profile )")
"""The runtime's receipt of a send that started an agent (lead/dispatch.py)."""
_REFUSED = "Did not send"
"""How the runtime's answer to a send it refused begins (a cap, a repeat, an unknown name)."""
_HELD_BACK = "Not sent:"
"""How the runtime's answer begins to a send it held back because results came in unread
(``prompt.news_first``): the turn ends, and the send may be made again after reading them."""


def _sends(since: list[Json]) -> list[tuple[Json, str]]:
    """The lead's ``send_message`` calls since the request, each with the runtime's answer."""
    answers = {str(m.get("tool_call_id")): _text(m) for m in since if m.get("role") == "tool"}
    return [
        (call, answers.get(str(call.get("id")), ""))
        for message in since
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or ()
        if call["function"]["name"] == "send_message"
    ]


def _held_back(since: list[Json]) -> list[str]:
    """The arguments of the sends held back for unread results and not made since: a follow-up
    whose send met its first painter's result was otherwise dropped, the request answered
    with the fox alone."""
    held: dict[tuple[str, str], str] = {}
    for call, said in _sends(since):
        key = (_argument(call, "to"), _argument(call, "content"))
        if said.startswith(_HELD_BACK):
            held[key] = call["function"]["arguments"] or "{}"
        elif not said.startswith(_REFUSED):
            held.pop(key, None)
    return list(held.values())


def _send_calls(sends: list[str], turn: int) -> Reply:
    """One ``send_message`` call per JSON arguments in ``sends``, streamed in pieces."""
    return Reply(
        calls=[
            Call("send_message", pieces(args, _ARG_PIECE), id=f"call_lead_{turn}_{number}")
            for number, args in enumerate(sends)
        ]
    )


def _started(since: list[Json]) -> list[str]:
    """The agents the lead's ``send_message`` calls since the request reached: the one its
    result names as started (the runtime's receipt), else the ``to`` it asked for; a send whose
    result refused it ("Did not send ...") or held it back ("Not sent: ...") reached nobody."""
    reached: list[str] = []
    for call, said in _sends(since):
        if said.startswith((_REFUSED, _HELD_BACK)):
            continue
        started = _STARTED.match(said)
        reached.append(started.group(1) or started.group(2) if started else _argument(call, "to"))
    return reached


def _answerer(body: Json, tools: list[Json], turn: int) -> Callable[[str], Reply]:
    """How this request wants the reply: an ``answer`` call when that tool is offered and calls
    are allowed (``tool_choice`` is not ``none``), else text."""
    if _tool(tools, "answer") is None or body.get("tool_choice") == "none":
        return _say

    def answer(text: str) -> Reply:
        media = list(dict.fromkeys(_urls(text)))
        args = json.dumps({"text": text, "status": "done", "media": media}, ensure_ascii=False)
        return Reply(calls=[Call("answer", pieces(args, _ARG_PIECE), id=f"call_answer_{turn}")])

    return answer


_OBJECT_START = re.compile(r"^(?:an?|the|some|\d+|two|three|four|five|six)\b", re.IGNORECASE)
"""A sub-task that starts like this names a thing, not work: it takes the verb before it."""


def _tasks_of(request: str) -> list[str]:
    """The request split into sub-tasks, each with its verb ("paint a fox and a heron" is
    "paint a fox", "paint a heron")."""
    tasks: list[str] = []
    verb = ""
    for part in _SPLIT.split(request):
        task = part.strip(" .")
        if not task:
            continue
        if verb and _OBJECT_START.match(task):
            task = f"{verb} {task}"
        else:
            verb = task.split()[0]
        tasks.append(task)
    return tasks


def _delegate(request: str, agents: list[str], turn: int) -> Reply:
    tasks = _tasks_of(request) or [request or "(empty request)"]
    anyone = [agent for agent in agents if not agent.startswith(BY_NAME_ONLY)] or agents
    sends = [
        json.dumps({"to": _named_in(task, agents) or anyone[n % len(anyone)], "content": task,
                    "type": "task"})
        for n, task in enumerate(tasks)
    ]  # fmt: skip
    return _send_calls(sends, turn)


def _named_in(task: str, agents: list[str]) -> str | None:
    """The agent whose name the task's verb starts like ("paint a fox" → painter), if any."""
    words = re.findall(r"[a-z]+", task.lower())
    for agent in agents:
        stem = agent.lower()[:5]
        if len(stem) >= 4 and any(word.startswith(stem) for word in words):
            return agent
    return None


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:8]


def _summary(results: list[tuple[str, str]], started: list[str], urls: list[str]) -> str:
    """This request's results, and every media URL of the conversation (a follow-up's answer
    still lists what the first request made)."""
    reported = list(dict.fromkeys(sender for sender, _ in results))
    lines = [f"Results from {len(results)} task(s), by {', '.join(reported)}."]
    lines += [f"- {sender}: {_first_line(text)}" for sender, text in results]
    outstanding = [name for name in dict.fromkeys(started) if name not in reported]
    if outstanding:
        lines.append(f"Still waiting for: {', '.join(outstanding)}.")
    lines.append("Media:" if urls else "No media was produced.")
    lines += [f"- {url}" for url in urls]
    return "\n".join(lines)


def _agents(send: Json) -> list[str]:
    names = [str(n) for n in _param(send, "to").get("enum") or () if n not in ("lead", "user")]
    return names or [DEFAULT_AGENT]


def _request_index(messages: list[Json]) -> int:
    """The latest user message that is a request: plain text, or an inbox block from the user."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        blocks = _inbox_blocks(message)
        if not blocks or all(sender == "user" for _, sender, _ in blocks):
            return index
    return -1


def _argument(call: Json, name: str) -> str:
    try:
        value = json.loads(call["function"]["arguments"] or "{}").get(name)
    except (ValueError, AttributeError):
        value = None
    return str(value) if value is not None else "?"


# --- the sub-agent ----------------------------------------------------------------------------


def _subagent(messages: list[Json], tools: list[Json]) -> Reply:
    task_at = max(
        (i for i, m in enumerate(messages) if m.get("role") == "user" and not _shows_image(m)),
        default=-1,
    )
    task = _strip_header(_text(messages[task_at])) if task_at >= 0 else ""
    since = messages[task_at + 1 :]
    called = [
        call["function"]["name"]
        for message in since
        if message.get("role") == "assistant"
        for call in message.get("tool_calls") or ()
    ]
    workers = [(name, param) for name, param in _string_tools(tools) if name != "send_message"]
    if _tool(tools, "describe_image") is not None:  # two optional strings: named here
        workers.append(("describe_image", "prompt"))
    outputs = [_text(m) for m in since if m.get("role") == "tool"]
    summary = _result_text(task, outputs)
    if "send_message" in called:
        return _say(f"Reported the result to the lead. {summary}")
    if workers and not called:
        # Ids carry a digest of the task: still deterministic, but two sub-agents waiting for
        # approval at once are not both asking about "call_sub_2_0" (approvals are keyed by id).
        prefix = f"call_sub_{_digest(task)}_{len(messages)}"
        return Reply(
            calls=[
                Call(name, pieces(json.dumps({param: task}), _ARG_PIECE), id=f"{prefix}_{i}")
                for i, (name, param) in enumerate(workers)
            ]
        )
    if called and _tool(tools, "send_message") is not None:
        args = json.dumps({"to": "lead", "type": "result", "content": summary})
        call = Call("send_message", pieces(args, _ARG_PIECE), id=f"call_res_{len(messages)}")
        return Reply(calls=[call])
    return _say(summary)


def _result_text(task: str, outputs: list[str]) -> str:
    urls = list(dict.fromkeys(url for output in outputs for url in _urls(output)))
    text = _written(task) or (f"Done: {task}." if task else "Done.")
    data = _data(outputs)
    if data:  # on the first line, which the lead's summary quotes
        text += " " + " ".join(data)
    refused = [_first_sentence(output) for output in outputs if _not_done(output)]
    if refused:  # a declined approval, a guard, a failed tool: say so, never "Done"
        text = f"Not done: {task}. " + " ".join(refused) if task else " ".join(refused)
    if urls:
        text += "\nmedia: " + " ".join(urls)
    return text


_HAIKU = "no key, no network / a scripted model answers / canned words, gently sent"
_WRITING = re.compile(r"^\s*(?:please\s+)?(?:write|compose|draft|pen)\b", re.IGNORECASE)
"""A writing task starts with a writing verb: "publish a haiku" is the publisher's, not one."""


def _written(task: str) -> str | None:
    """A canned text for a writing task ("write a haiku"), so a writer writes something rather
    than claiming it is done; None for any other task. One line, since the lead's summary quotes
    each result's first line."""
    if not _WRITING.search(task):
        return None
    if "haiku" in task.lower():
        return f"Wrote a haiku (canned, offline model): {_HAIKU}"
    return (
        f"Wrote a draft (canned, offline model): {task.rstrip('.')} — these words stand in for a "
        "real model's; configure OPENAI_API_KEY for those."
    )


_NOT_DONE = re.compile(
    r"^\S+ (?:did not run: |failed with |did not finish within )"
    r"|^\S+: no (?:file was uploaded|image is available) "
)
"""How the engine answers a call that never ran, raised, or ran past its timeout
(``<tool> did not run: <why>``, ``<tool> failed with <Error>: <why>``), or a question for a file
or an image nobody answered (``<tool>: no file was uploaded (<why>)``, engine/messages.py)."""


def _not_done(output: str) -> bool:
    return _NOT_DONE.match(output.strip()) is not None


def _data(outputs: list[str]) -> list[str]:
    """The tool outputs that are JSON objects (what MCP tools answer with, such as the time in a
    time zone), compact: the task's answer is the data, so the result carries it to the lead."""
    found = []
    for output in outputs:
        try:
            value = json.loads(output)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(json.dumps(value, ensure_ascii=False))
    return found


def _shows_image(message: Json) -> bool:
    """An image ``describe_image`` attached (a user message with image content): no task."""
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") == "image_url" for part in content
    )


def _first_sentence(text: str) -> str:
    return text.strip().split(". ")[0].rstrip(".") + "."


def _string_tools(tools: list[Json]) -> list[tuple[str, str]]:
    """(name, parameter) of each tool whose only (or only required) parameter is a string."""
    found = []
    for tool in tools:
        function = tool.get("function") or {}
        schema = function.get("parameters") or {}
        properties: dict[str, Any] = schema.get("properties") or {}
        names = list(schema.get("required") or ()) or list(properties)
        if len(names) == 1 and (properties.get(names[0]) or {}).get("type") == "string":
            found.append((str(function.get("name")), names[0]))
    return found


# --- shared helpers ---------------------------------------------------------------------------


def _say(text: str) -> Reply:
    """Stream ``text`` in several deltas, a few words at a time, as a model would."""
    words = re.findall(r"\S+\s*|\s+", text)
    deltas = ["".join(words[i : i + 3]) for i in range(0, len(words), 3)] or [text]
    return Reply(text=deltas)


def _with_delay(reply: Reply, delay: float) -> Reply:
    return Reply(text=reply.text, calls=reply.calls, delay=delay)


def _text(message: Json) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _inbox_blocks(message: Json) -> list[tuple[str, str, str]]:
    """(type, sender, text) of each ``[type from sender]`` block in a user or tool message."""
    if message.get("role") not in ("user", "tool"):
        return []
    text = _text(message)
    heads = list(_INBOX_HEADER.finditer(text))
    if not heads:
        return []
    return [
        (head["type"], head["sender"].strip(), text[head.end() : nxt.start() if nxt else None])
        for head, nxt in zip(heads, [*heads[1:], None], strict=True)
    ]


def _strip_header(text: str) -> str:
    return _INBOX_HEADER.sub("", text, count=1).strip()


def _media_line_urls(text: str) -> list[str]:
    """The URLs of a block's ``media:`` line: what the runtime says the agent produced (a URL its
    words mention, such as a remote agent's own file path, is no media of this session)."""
    return [url for line in text.splitlines() if line.startswith("media:") for url in _urls(line)]


def _urls(text: str) -> list[str]:
    return [url.rstrip(".;:") for url in _URL.findall(text)]


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if not line.startswith("media:")]
    return lines[0] if lines else "(no text)"


def _tool(tools: list[Json], name: str) -> Json | None:
    for tool in tools:
        if (tool.get("function") or {}).get("name") == name:
            return dict(tool)
    return None


def _param(tool: Json, name: str) -> Json:
    schema = (tool.get("function") or {}).get("parameters") or {}
    return dict((schema.get("properties") or {}).get(name) or {})

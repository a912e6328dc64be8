"""The session page's first paint: the session as its log has it now, rendered on the server.

Why: the page used to arrive as an empty shell ("pending", "none pending" while an approval
waited) until its script had replayed the whole event stream, and a page without script (a
terminal browser, a screen reader that does not run it, a failed asset) never showed anything.
Now the server folds the log (:class:`~baton.session.view.SessionView`, the fold every view shares)
and writes what it shows into the page — status, task, the lead's text, each sub-agent's card,
the pending approvals with their call ids, the open questions for a file or an image with their
inputs, the final answer — in the same markup the script
builds, and the script carries on from the log's last cursor (``baton-cursor``), so nothing is
shown twice. Media are written as ``/media/…`` links: the page names no server path.

Every value is HTML-escaped here; the fragments go into the template as they are.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from baton.bus.events import QuestionAsked, ToolCallInfo, asked_for
from baton.server.media import public_url
from baton.server.state import StateFolder
from baton.session.view import AgentView, SessionView, describe_placement

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
TERMINAL = ("completed", "incomplete", "failed", "cancelled", "timed_out")


def fragments(folder: StateFolder, media_root: Path) -> dict[str, str]:
    """The template's values (already HTML) for the session folded in ``folder``."""
    view = folder.view
    rounds = [part for part in view.lead_rounds if part]
    last_round = view.lead_rounds[-1] if view.lead_rounds else ""
    finished = view.status in TERMINAL
    asked = [] if finished else list(view.questions.values())
    return {
        "STATUS": escape(view.status),
        "CURSOR": escape(folder.last_cursor or ""),
        "TASK": escape(view.task),
        "MODEL": escape(_model_line(view)),
        "BUDGET": _budget(view),
        "RETRIES": _retries(view),
        "LEAD_TEXT": escape("\n\n".join(rounds)),
        "ROUND_CHARS": str(len(last_round)),
        "LEAD_BREAK": "true" if rounds and not last_round else "false",
        "APPROVALS": "".join(_approval(agent, call) for (agent, _), call in view.pending.items())
        + "".join(_question(question) for question in asked),
        "NO_APPROVALS": " hidden" if view.pending or asked else "",
        "AGENTS": "".join(_agent(name, agent, media_root) for name, agent in view.agents.items()),
        "FINAL": _final(view, media_root),
        "FINAL_HIDDEN": "" if view.finished is not None else " hidden",
        "POST_HIDDEN": " hidden" if finished else "",
        "POST_DISABLED": " disabled" if finished else "",
        "POST_CLOSED": _closed(view) if finished else "",
        "POST_CLOSED_HIDDEN": "" if finished else " hidden",
        "CONNECTION": "finished" if finished else "",
        "EVENTS": str(folder.events),
    }


def _model_line(view: SessionView) -> str:
    if not view.model:
        return ""
    offline = " (offline: built-in, canned answers)" if view.offline else ""
    return f"model: {view.model}{offline}"


def _budget(view: SessionView) -> str:
    spent = view.budget
    if spent is None:
        return '<p id="budget" class="budget" hidden></p>'

    def part(used: int, cap: int | None, unit: str) -> str:
        return f"{used:,} {unit}" if cap is None else f"{used:,}/{cap:,} {unit}"

    text = (f"budget: {part(spent.calls, spent.max_calls, 'model calls')}, "
            f"{part(spent.tokens, spent.max_tokens, 'tokens')}")  # fmt: skip
    over = (spent.max_calls is not None and spent.calls >= spent.max_calls) or (
        spent.max_tokens is not None and spent.tokens >= spent.max_tokens
    )
    return f'<p id="budget" class="budget" data-spent="{str(over).lower()}">{escape(text)}</p>'


def _retries(view: SessionView) -> str:
    last = view.last_retry
    if last is None:
        return f'<p id="retries" class="retries" data-count="{view.retries}" hidden></p>'
    text = (f"model retries: {view.retries} · last {last.agent}: attempt {last.attempt} failed "
            f"({last.reason}); retrying in {last.delay_s:.1f} s")  # fmt: skip
    return f'<p id="retries" class="retries" data-count="{view.retries}">{escape(text)}</p>'


def _approval(agent: str, call: ToolCallInfo) -> str:
    """One pending approval, as the script builds it (its buttons are wired by the script);
    the call id is shown, for ``baton approve`` from a terminal."""
    return (
        f'<div class="approval" data-agent="{escape(agent)}" data-call="{escape(call.call_id)}">'
        f"<p>{escape(agent)} asks to run <code>{escape(call.name)}({escape(call.arguments)})"
        f'</code> <span class="muted call-id">call id <samp>{escape(call.call_id)}</samp>'
        "</span></p>"
        '<button class="approve">Approve</button> <button class="decline">Decline</button> '
        '<span class="muted note"></span></div>'
    )


def _question(event: QuestionAsked) -> str:
    """One open question for a file or an image, as the script builds it (wired by the script,
    which also fills an image question's picker with the session's pictures); the question id
    is shown, for ``baton upload`` from a terminal."""
    kind = asked_for(event.kind)
    accept = ",".join(event.accept) or ("image/*" if event.kind == "image" else "")
    prompt = f": {event.prompt}" if event.prompt else ""
    picker = '<div class="picker"></div>' if event.kind == "image" else ""
    return (
        f'<div class="question" data-agent="{escape(event.agent)}" '
        f'data-question="{escape(event.question_id)}" data-kind="{escape(event.kind)}">'
        f"<p>{escape(event.agent)} asks for {kind}{escape(prompt)} "
        f'<span class="muted call-id">question <samp>{escape(event.question_id)}</samp></span>'
        "</p>"
        f'<input type="file" class="file" accept="{escape(accept)}"> '
        '<button class="upload">Upload</button> '
        f"{picker}"
        '<input type="url" class="url" placeholder="or a URL (https:// or data:)"> '
        '<button class="use-url">Use URL</button> '
        '<button class="decline">Cancel</button> <span class="muted note"></span></div>'
    )


def _agent(name: str, agent: AgentView, media_root: Path) -> str:
    left = agent.exit_reason and agent.exit_reason != "finished"
    status = escape(agent.exit_reason if left else agent.phase)
    profile = f"profile: {agent.profile}" if agent.profile else ""
    retries = f"model retries: {agent.retries}" if agent.retries else ""
    counted = f' data-retries="{agent.retries}"' if agent.retries else ""
    waiting = str(agent.waiting_for_worker).lower()
    pool = f' data-pool="{escape(agent.unclaimed.pool)}"' if agent.unclaimed else ""
    return (
        f'<article class="agent" data-agent="{escape(name)}" data-status="{status}"{counted}'
        f"{pool}>"
        f'<div class="status" data-status="{status}">{status}</div>'
        f'<div class="name">{escape(name)}</div>'
        f'<div class="profile">{escape(profile)}</div>'
        f'<div class="worker" data-waiting="{waiting}">{escape(describe_placement(agent))}</div>'
        f'<div class="progress">{escape(agent.latest)}</div>'
        f'<div class="retries">{escape(retries)}</div>'
        f'<div class="media">{media(agent.media_urls, media_root)}</div>'
        "</article>"
    )


def media(urls: list[str], media_root: Path) -> str:
    """Pictures as images and anything else as links, each by its ``/media/`` path."""
    shown: list[str] = []
    for url in urls:
        href = public_url(url, media_root)
        if href.startswith("file:"):
            continue  # outside the media directory: the server does not serve it, nor name it
        name = escape(href.rsplit("/", 1)[-1])
        if href.lower().endswith(IMAGE_SUFFIXES) or href.startswith("data:image/"):
            shown.append(f'<img src="{escape(href)}" alt="{name}">')
        else:
            shown.append(f'<a href="{escape(href)}">{escape(href)}</a>')
    return "".join(shown)


def _final(view: SessionView, media_root: Path) -> str:
    """The final answer's elements (empty until the session finished: the script fills them)."""
    finished = view.finished
    check = view.answer_check
    missing = [public_url(url, media_root) for url in check.missing_media] if check else []
    invented = list(check.invented_urls) if check else []
    items = list(check.missing_items) if check else []
    if finished is not None and finished.invented_urls:
        invented = list(finished.invented_urls)
    answer = finished.answer if finished is not None else ""
    urls = list(finished.media_urls) if finished is not None else []
    return (
        f'<div id="answer" class="stream">{escape(answer)}</div>'
        + _line("invented", "error", "The answer cites URLs no tool produced: ", invented)
        + _line("missing-media", "muted", "Appended to the answer (it left them out): ", missing)
        + _line("missing-items", "error", "Declared items without a result: ", items)
        + f'<div id="final-media" class="media">{media(urls, media_root)}</div>'
    )


def _line(id_: str, kind: str, lead: str, urls: list[str]) -> str:
    hidden = "" if urls else " hidden"
    text = escape(lead + ", ".join(urls)) if urls else ""
    return f'<p id="{id_}" class="{kind}"{hidden}>{text}</p>'


def _closed(view: SessionView) -> str:
    return escape(
        f"The session ended: {view.status}: follow-ups and cancelling are closed. "
        "Start a new session from the list."
    )

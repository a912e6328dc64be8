"""Every text the engine writes to the model on its own behalf, in one place.

A synthetic answer replaces a tool's output whenever governance answers a call instead of running it
(limits, repeats, declines, human waits), and when a call cannot run (unknown tool, invalid
arguments, a crash). Each one follows the same rule: first say what happened, then say what to do
next — plainly, so that a small local model does not spin retrying the same call. Keeping them
together keeps the wording consistent and lets tests assert on the exact phrases.
"""

from __future__ import annotations

from collections.abc import Sequence

DO_NOT_RETRY = "Do not retry it this turn; answer with what you have."


def wrap_up(tool: str, rounds: int, finish_with: Sequence[str] = ()) -> str:
    """The soft round limit has passed: persuade the model to answer — or, for an agent whose
    work ends with a call (``finish_with``: its terminal tools, e.g. a sub-agent's
    ``send_message``), to make that call now: it still runs."""
    spent = f"{tool} did not run: the tool budget for this turn is spent ({rounds} tool rounds). "
    if finish_with:
        names = " or ".join(finish_with)
        return (
            spent + f"Call no other tool; send your result now with {names}, "
            "with what you have so far."
        )
    return spent + "Do not call any more tools; answer the user now with what you have."


def hard_stop(tool: str, rounds: int) -> str:
    """The hard round limit has passed: the loop ends after this answer."""
    return (
        f"{tool} did not run: the hard limit of tool rounds for this turn was reached "
        f"({rounds} rounds) and the turn is over. No further tools will run this turn."
    )


def cancelled(tool: str) -> str:
    """The turn was cancelled (stream stopped, client gone) before or while the call ran."""
    return (
        f"{tool} did not run to completion: the turn was cancelled. "
        "Do not retry it; wait for the user's next message."
    )


def repeated(tool: str, count: int, limit: int) -> str:
    """The identical call was made more often than allowed this turn."""
    return (
        f"{tool} did not run: it was already called {count - 1} times this turn with exactly these "
        f"arguments (limit {limit}) and the result will not change. {DO_NOT_RETRY}"
    )


def repeated_content(tool: str, count: int, limit: int) -> str:
    """The same request (by the tool's repeat key, e.g. a message's content) came too often."""
    return (
        f"{tool} did not run: the same request was already made {count - 1} times this turn "
        f"(limit {limit}), even if to a different target, and repeating it will not help. "
        f"{DO_NOT_RETRY}"
    )


def declined_repeat(tool: str) -> str:
    """The tool was declined earlier this turn; a re-request is declined without asking again."""
    return (
        f"{tool} did not run: it was already declined earlier this turn, so it was declined again "
        f"without asking. {DO_NOT_RETRY}"
    )


def interaction_budget(tool: str, budget: int) -> str:
    """The round already used its human interactions; this one would wait on a person too."""
    return (
        f"{tool} did not run: this round already used its {budget} question(s) to the user and "
        "only that many are allowed per round. If you still need it, call it on its own in your "
        "next round; otherwise answer with what you have."
    )


def approval_declined(tool: str, reason: str) -> str:
    """The human said no."""
    why = f" Reason given: {reason}." if reason else ""
    return f"{tool} did not run: the user declined it.{why} {DO_NOT_RETRY}"


def approval_denied_by_policy(tool: str) -> str:
    """The session declines every call that needs approval (``approve=deny``): nobody was asked."""
    return (
        f"{tool} did not run: this session declines every call that needs approval "
        f"(approve=deny), so no one was asked. {DO_NOT_RETRY}"
    )


def approval_unanswerable(tool: str, why: str) -> str:
    """Nobody could be asked (no terminal, no process that can reach the session): declined by
    the runtime, not by a person."""
    because = f" ({why})" if why else ""
    return (
        f"{tool} did not run: it needs a person's approval and nobody could be asked{because}, "
        f"so it was declined without asking. {DO_NOT_RETRY}"
    )


def approval_failed(tool: str, why: str) -> str:
    """The approval question could not be answered (timeout, error): fail closed."""
    return (
        f"{tool} did not run: approval could not be obtained ({why}), so it was declined. "
        f"{DO_NOT_RETRY}"
    )


def upload_received(tool: str, name: str, url: str, media_type: str) -> str:
    """The user uploaded the file the model asked for."""
    kind = f" ({media_type})" if media_type else ""
    return f"{tool}: the user uploaded {name!r}{kind}. It is available at {url}"


def upload_missing(tool: str, why: str) -> str:
    """The upload dialog was cancelled, timed out or failed: the tool is declined for the turn."""
    return (
        f"{tool}: no file was uploaded ({why}). Do not ask for an upload again this turn; "
        "tell the user to upload the file in a new message, and answer with what you have."
    )


def image_attached(tool: str, url: str) -> str:
    """The image is attached as the next user message, for a vision model to look at."""
    return (
        f"{tool}: the image {url} is attached in the next user message. "
        "Look at it there and answer from what you see."
    )


def image_followup(tool: str, url: str, prompt: str) -> str:
    """The text that goes with the attached image in the follow-up user message."""
    ask = f" {prompt}" if prompt else ""
    return f"Image requested by {tool}: {url}.{ask}"


def image_missing(tool: str, why: str) -> str:
    """No image could be obtained: the tool is declined for the turn."""
    return (
        f"{tool}: no image is available ({why}). Do not ask for it again this turn; tell the "
        "user to attach the image in a new message, and answer with what you have."
    )


def unknown_tool(tool: str, valid: Sequence[str]) -> str:
    """The model named a tool that does not exist here."""
    names = ", ".join(valid) if valid else "none — answer without tools"
    return (
        f"{tool!r} did not run: there is no tool by that name. Valid tools: {names}. "
        "Call one of those by its exact name, or answer with what you have."
    )


def invalid_arguments(tool: str, error: str) -> str:
    """The arguments failed validation against the tool's schema."""
    return (
        f"{tool} did not run: its arguments are invalid. {error.strip()} "
        "Fix the arguments to match the tool's schema and call it again once."
    )


def tool_failed(tool: str, error: BaseException) -> str:
    """The tool raised: give the model the error text so it can adapt."""
    text = str(error) or type(error).__name__
    return (
        f"{tool} failed with {type(error).__name__}: {text}. "
        "Do not call it again with the same arguments; change them or answer with what you have."
    )


def tool_timed_out(tool: str, timeout_s: float) -> str:
    """The tool ran past its own timeout and was stopped."""
    return (
        f"{tool} did not finish within {timeout_s:g} s and was stopped. "
        "Do not retry it with the same arguments; answer with what you have."
    )


def reply_cut(chars: int, *, runaway: bool) -> str:
    """The note that asks once more after a reply was cut at the output limit or as a runaway."""
    why = "it kept repeating itself" if runaway else "it was longer than the output limit"
    return (
        f"Your previous reply was cut off after {chars} characters because {why}, and nobody "
        "saw it. Reply again, much shorter: a few sentences at most, with no repetition. "
        "If you need a tool, call it through the tools interface instead of writing about it."
    )


def truncated(kept: int, total: int) -> str:
    """Appended to a result cut to fit; says how much was lost."""
    return (
        f"\n\n[truncated: {total - kept} of {total} characters cut. "
        "Ask for a narrower part if you need the rest.]"
    )


def dropped_for_budget(chars: int) -> str:
    """Replaces an older tool result removed to fit the context budget."""
    return f"[older tool output removed to fit the context budget ({chars} characters)]"

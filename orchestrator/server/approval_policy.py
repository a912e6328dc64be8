"""The server's approval policy as a ceiling on what its clients may ask for.

A client that starts a session (``POST /sessions``, MCP ``run``, an A2A message, an AG-UI run)
must not get looser approvals than the operator chose for the server (``baton serve --approve``,
``baton mcp --approve``, ``BATON_APPROVE``): otherwise anyone allowed to start a session could
have every gated tool run unasked. Strictness is ``deny`` > ``ask`` > ``auto``; a client may
always ask for something stricter than the policy, never for something looser. One rule for
every door, so none of them is the hole.
"""

from __future__ import annotations

from typing import Final

from baton.bus.messages import ApproveMode

STRICTNESS: Final[dict[ApproveMode, int]] = {"auto": 0, "ask": 1, "deny": 2}
"""How strict each mode is: a higher number lets fewer gated tool calls run unasked."""

CLIENT_DEFAULT: Final[ApproveMode] = "ask"
"""What a client that says nothing gets, unless the policy is stricter (then the policy)."""


class ApprovalTooLoose(Exception):
    """A client asked for looser approvals than the server's policy allows; nothing started.
    Its message is the one line the client sees: the policy, and how the operator changes it."""


def allowed_modes(policy: ApproveMode) -> list[ApproveMode]:
    """The modes a client may ask for under ``policy``, loosest first."""
    return [mode for mode, rank in STRICTNESS.items() if rank >= STRICTNESS[policy]]


def stricter(one: ApproveMode, other: ApproveMode) -> ApproveMode:
    """The stricter of two modes."""
    return one if STRICTNESS[one] >= STRICTNESS[other] else other


def session_approve(asked: ApproveMode | None, policy: ApproveMode) -> ApproveMode:
    """The approve mode of a session a client starts on a server whose policy is ``policy``.

    ``asked`` is what the client said (None: it said nothing, and gets ``ask``, or the policy
    where that is stricter). Raises :class:`ApprovalTooLoose` when it asked for a looser mode."""
    if asked is None:
        return stricter(CLIENT_DEFAULT, policy)
    if STRICTNESS[asked] < STRICTNESS[policy]:
        allowed = " or ".join(f'"{mode}"' for mode in allowed_modes(policy))
        raise ApprovalTooLoose(
            f'approve: "{asked}" is looser than this server\'s approval policy ("{policy}"), '
            f"so no session was started; ask for {allowed}, or have the server's operator "
            f"start it with --approve {asked} (or BATON_APPROVE={asked}, or approve = "
            f'"{asked}" in its config file)'
        )
    return asked

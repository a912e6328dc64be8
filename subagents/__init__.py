"""Sub-agents: the hand-written inbox loop, agent profiles and the worker service."""

"""What the tests of several packages share: scripted models, event waits, media paths, the tools
and profiles that sub-agents load by import path.

Support that code built on baton needs too — the ``redis-server`` launcher and the confinement
of model requests to this machine — lives in :mod:`baton.testing` instead.
"""

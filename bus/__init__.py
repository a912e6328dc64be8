"""The message bus: envelopes, the ``Bus`` protocol, its in-process and Redis backends, the
session event log and the spawn queue. Imports nothing from the rest of baton."""

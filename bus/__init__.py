"""The message bus: envelopes, the ``Bus`` (a bundle of small parts, :mod:`baton.bus.parts`), its
in-process and Redis backends, the session event log and the spawn queues. Imports nothing from
the rest of baton but the error root below it (:mod:`baton.errors`)."""

"""What an activation did: the ``Recorder`` keeps it while it runs, the ``TraceWriter``
turns it into a stored trace off the answer's path."""

"""The answer: the scene rendered into a request, the provider's stream through the output
filters into the channel, the tool loop (``toolrunner``, ``toolrules``), the planner, and the
side calls the pipeline's steps make (``sidecall``)."""

"""Before the model: the steps between the room and the conversation (``steps.Pipeline``):
keywords, the loop breaker, the speak gate, limits (``limits`` over the counts of
``limitbook``) and the context evaluator."""

"""Questions from the model to the operator (``ask_user``), answered by a routed resolver."""

from ._questions import NO_ONE, Answer, FieldKind, Question, QuestionField, ask_user

__all__ = ["NO_ONE", "Answer", "FieldKind", "Question", "QuestionField", "ask_user"]

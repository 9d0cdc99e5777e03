"""Validation rules declared once, next to the model they guard.

Each rule becomes an `x-kubernetes-validations` entry of the generated CRD, where the API server
evaluates it; `disttrain render` evaluates the very same CEL text (see `validation.py`), so both
layers give one verdict with one message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rule:
    """A CEL expression over `self` (the value of the node it sits on) and the message users see."""

    rule: str
    message: str

    def as_schema(self) -> dict[str, str]:
        return {"rule": self.rule, "message": self.message}


VALIDATIONS_KEY = "x-kubernetes-validations"


def schema_rules(*rules: Rule) -> dict[str, Any]:
    """The json_schema_extra that attaches rules to a model or field."""
    return {VALIDATIONS_KEY: [rule.as_schema() for rule in rules]}

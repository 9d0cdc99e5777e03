"""Whose job it is: `spec.managedBy` of a DistTrainJob, `spec.runPolicy.managedBy` of a TFJob. A job that
names another manager (Kueue's MultiKueue, which mirrors a worker cluster's copy onto it) is left alone:
no children, no status, no Events. A value no manager could have (past an older CRD's schema) names none:
the reconcile refuses it as an invalid spec, naming the field."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from disttrain_core.api.spec import MANAGED_BY_MAX_LENGTH, MANAGED_BY_PATTERN, THIS_OPERATOR
from disttrain_core.api.tenant_input import as_mapping
from disttrain_core.api.tfjob import TRAINING_OPERATOR
from disttrain_core.served import is_served

# A TFJob's manifest may name training-operator, which the operator stands in for where it serves TFJobs.
_OURS = frozenset({"", THIS_OPERATOR})
_OURS_FOR_TFJOBS = _OURS | {TRAINING_OPERATOR}


def managed_elsewhere(body: Mapping[str, Any]) -> str | None:
    """The other manager a job names, or None where it is this operator's to run (unset, ours, or not a
    manager's name)."""
    served = is_served(body)
    spec = as_mapping(body.get("spec"))
    value = (as_mapping(spec.get("runPolicy")) if served else spec).get("managedBy")
    named = isinstance(value, str) and len(value) <= MANAGED_BY_MAX_LENGTH and re.fullmatch(MANAGED_BY_PATTERN, value)
    return str(value) if named and value not in (_OURS_FOR_TFJOBS if served else _OURS) else None

"""Whether this operator may serve TFJobs here: never beside another controller that owns them.

Two controllers acting on one TFJob would each create its pods and write its status. The sign of
ownership is the `tfjobs.kubeflow.org` CRD itself: disttrain's CRD (`crds/tfjob/`) carries the label
`disttrain.io/crd-owner: disttrain`; training-operator installs a CRD without it. With such a CRD the
operator refuses to start, unless told to adopt the TFJobs (`--adopt-tfjobs`), which is for a
cluster whose training-operator is already uninstalled but whose CRD (and TFJobs) are kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from disttrain_core.api import crd, tfjob

CRD_NAME = f"{tfjob.PLURAL}.{tfjob.GROUP}"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"


class NotOursError(RuntimeError):
    """Another controller's TFJob CRD, or none at all: serving TFJobs here would fight it, or serve nothing."""


def refusal(definition: Mapping[str, Any] | None, adopt: bool) -> str | None:
    """Why TFJobs must not be served with this CRD (None: they may)."""
    if definition is None:
        return f"the CRD {CRD_NAME} is not installed: apply crds/tfjob/ (or overlays/serve-tfjobs/) first"
    labels = (definition.get("metadata") or {}).get("labels") or {}
    if labels.get(crd.CRD_OWNER_LABEL) == "disttrain" or adopt:
        return None
    return (
        f"the CRD {CRD_NAME} is not disttrain's (it has no label {crd.CRD_OWNER_LABEL}=disttrain): another "
        "controller, such as Kubeflow's training-operator, owns TFJobs here. Uninstall it first "
        "(docs/migrating-from-tfjob.md), or pass --adopt-tfjobs once it is gone"
    )

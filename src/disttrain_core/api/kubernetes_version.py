"""The Kubernetes release whose PodTemplateSpec schema the CRD embeds; the local cluster runs the same one."""

from __future__ import annotations

KUBERNETES_VERSION = "v1.36.3"

"""Rights as RBAC files of deploy/ grant them, and those the API server's audit log says RBAC refused a
ServiceAccount."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

DECISION = "authorization.k8s.io/decision"  # how the audit log records RBAC's answer: allow or forbid
AUDIT_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"  # how the audit log writes times, for `since`
Right = tuple[str, str, str]  # API group, resource (`pods/log` for a subresource), verb


def documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def rights(rules: Iterable[dict[str, Any]]) -> set[Right]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def role_rights(path: Path, *kinds: str) -> set[Right]:
    """Every right the file's roles of these kinds hold, bound or not."""
    return rights(
        rule for document in documents(path) if document["kind"] in kinds for rule in document.get("rules") or []
    )


def bound_rights(path: Path, account: str) -> set[Right]:
    """The rights the file's bindings give the ServiceAccount `account`."""
    found = documents(path)
    roles = {(doc["kind"], doc["metadata"]["name"]): doc["rules"] for doc in found if doc["kind"].endswith("Role")}
    return rights(
        rule
        for binding in found
        if binding["kind"].endswith("RoleBinding")
        and any(s["kind"] == "ServiceAccount" and s["name"] == account for s in binding["subjects"])
        for rule in roles.get((binding["roleRef"]["kind"], binding["roleRef"]["name"]), [])
    )


def audit_events(logs: Iterable[Path], username: str, since: str, until: str | None = None) -> Iterator[dict[str, Any]]:
    """The requests `username` made from `since` (RFC 3339, as the log writes times) on, and before `until`, as
    audit events."""
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            event = json.loads(line)
            at = event["stageTimestamp"]
            if event["user"]["username"] == username and event.get("objectRef") and since <= at < (until or "~"):
                yield event


def _requests(
    logs: Iterable[Path], username: str, since: str, until: str | None = None
) -> Iterator[tuple[Right, bool]]:
    """Each right `username` asked for from `since` on (and before `until`), and whether RBAC allowed it; a
    request RBAC allowed and admission refused (as in a namespace being deleted) was allowed."""
    for event in audit_events(logs, username, since, until):
        target = event["objectRef"]
        subresource = f"/{target['subresource']}" if target.get("subresource") else ""
        right = (target.get("apiGroup", ""), f"{target['resource']}{subresource}", event["verb"])
        yield right, (event.get("annotations") or {}).get(DECISION) == "allow"


def used_rights(logs: Iterable[Path], username: str, since: str) -> set[Right]:
    """The rights `username` used from `since` on: its requests that RBAC allowed."""
    return {right for right, allowed in _requests(logs, username, since) if allowed}


def refused_rights(logs: Iterable[Path], username: str, since: str, until: str | None = None) -> set[Right]:
    """The rights `username` asked for from `since` on (and before `until`) and RBAC refused."""
    return {right for right, allowed in _requests(logs, username, since, until) if not allowed}

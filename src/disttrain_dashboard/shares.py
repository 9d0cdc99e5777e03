"""Fair shares of what the dashboard holds open for its viewers (event streams, feeds).

Identities are free to a tenant: `edit` in a namespace makes ServiceAccounts and their tokens, each a
viewer. Namespaces are not. So what is held counts three ways: in all, for one namespace viewed (the
dashboard's view of every namespace counting as one, and every namespace a viewer may not read as one
more), and one viewer's in all. A tenant's many identities take at most their namespace's share, and a
viewer of another namespace is still served.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

EVERY_NAMESPACE = "(every namespace)"
UNREADABLE = "(namespaces the viewer may not read)"


@dataclass(frozen=True)
class Limits:
    total: int
    per_namespace: int
    per_viewer: int

    def refusal(self, total: int, of_namespace: int, of_viewer: int, namespace: str) -> str | None:
        """Why one more beside those already held would pass a limit; None where it would not."""
        if of_viewer >= self.per_viewer:
            return f"you hold {self.per_viewer} already"
        if of_namespace >= self.per_namespace:
            return f"viewers of {namespace} hold {self.per_namespace} already"
        if total >= self.total:
            return f"the dashboard holds {self.total} already"
        return None


class Shares:
    """What viewers hold at once, by namespace viewed and viewer, within `limits`."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._held: Counter[tuple[str, str]] = Counter()  # by (namespace viewed, viewer)
        self._lock = threading.Lock()

    def take(self, viewer: str, namespace: str) -> str | None:
        """One more for this viewer of this namespace; why not (and nothing taken) where a limit stands."""
        with self._lock:
            of_namespace = sum(count for (held, _), count in self._held.items() if held == namespace)
            of_viewer = sum(count for (_, holder), count in self._held.items() if holder == viewer)
            refused = self._limits.refusal(self._held.total(), of_namespace, of_viewer, namespace)
            if refused is None:
                self._held[(namespace, viewer)] += 1
            return refused

    def give_back(self, viewer: str, namespace: str) -> None:
        with self._lock:
            self._held[(namespace, viewer)] -= 1
            if self._held[(namespace, viewer)] <= 0:
                del self._held[(namespace, viewer)]

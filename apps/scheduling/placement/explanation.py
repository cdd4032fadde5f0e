"""Per-filter accounting: how many hosts each filter removed, and why.

Shape (what the API and the ``capacity_unavailable`` problem document carry)::

    {"hosts_considered": 1000, "path": "exact",
     "filters": [{"filter": "host_state", "removed": 12, "reasons": {"cordoned": 3, "faulty": 9}}, ...],
     "remaining": 0, "evaluated": 40}
"""
from __future__ import annotations

from collections import Counter


class Explanation:
    """Filters run in a fixed order; each removes hosts from what the previous ones left."""

    def __init__(self, considered: int = 0, path: str = "exact"):
        self.considered = considered
        self.path = path
        self._order: list[str] = []
        self._reasons: dict[str, Counter] = {}
        self.notes: dict[str, str] = {}
        self.remaining = 0
        self.evaluated: int | None = None

    def declare(self, *names: str) -> None:
        for n in names:
            if n not in self._reasons:
                self._order.append(n)
                self._reasons[n] = Counter()

    def remove(self, name: str, reason: str, n: int = 1) -> None:
        self.declare(name)
        self._reasons[name][reason] += n

    def note(self, name: str, text: str) -> None:
        self.declare(name)
        self.notes[name] = text

    def removed(self, name: str) -> int:
        return sum(self._reasons.get(name, Counter()).values())

    def blocking_filters(self) -> list[str]:
        return [n for n in self._order if self.removed(n)]

    def as_dict(self) -> dict:
        filters = []
        for n in self._order:
            entry = {"filter": n, "removed": self.removed(n), "reasons": dict(self._reasons[n].most_common())}
            if n in self.notes:
                entry["note"] = self.notes[n]
            filters.append(entry)
        out = {"hosts_considered": self.considered, "path": self.path, "filters": filters,
               "remaining": self.remaining}
        if self.evaluated is not None:
            out["evaluated"] = self.evaluated
        return out

    def summary(self) -> str:
        parts = [f"{n} removed {self.removed(n)}" for n in self.blocking_filters()]
        return f"{self.considered} hosts considered; " + ", ".join(parts) if parts else "no hosts"

"""InfiniBand port health between polls: the deltas of the sysfs counters (`sysfs.ib_port_health`) become signals.

Per port, compared with the previous poll of the same agent process:

- ``ib_port_down``: the port is not ACTIVE (once per time it leaves ACTIVE; the first poll reports a port that is
  down already);
- ``ib_link_flap``: `link_downed` went up (count: by how much); where the kernel has no `link_downed`, a port seen
  back in ACTIVE after a poll that saw it down counts one;
- ``ib_port_errors``: the error counters (`sysfs.IB_ERROR_COUNTERS`) went up (count: the sum of the increases;
  the message lists them per counter);
- ``ib_rate_degraded``: an ACTIVE port runs slower than the fastest ACTIVE InfiniBand port of the host (a link
  that trained at fewer lanes or a lower speed; once until it runs at that rate again).

The first poll only records the counters (what they hold counts since the driver loaded, not since this agent
looked). A counter lower than before was reset (driver reload, `perfquery -R`): its value is the increase. The
thresholds per window are the control plane's (classification table), not the agent's.
"""
from __future__ import annotations

import time


def _key(port: dict) -> tuple[str, int]:
    return port["device"], port["port_number"]


class IbPortWatch:
    def __init__(self):
        self.last: dict[tuple[str, int], dict] = {}
        self.down: set[tuple[str, int]] = set()
        self.slow: dict[tuple[str, int], int] = {}

    def poll(self, ports: list[dict]) -> list[dict]:
        """`ports` as `sysfs.ib_port_health` returns them -> [{"kind", "hca_device", "hca_port_number", "count",
        "message", "ref"}]; `ref` identifies the occurrence within this boot (a counter total, or the time of a
        state change), for the caller's dedup key."""
        out = []
        fastest = max((p["rate_gbps"] for p in ports if p["state"] == "ACTIVE"), default=0)
        for port in ports:
            key, prev = _key(port), self.last.get(_key(port))
            where = {"hca_device": port["device"], "hca_port_number": port["port_number"]}
            active = port["state"] == "ACTIVE"
            if not active and key not in self.down:
                self.down.add(key)
                out.append({"kind": "ib_port_down", **where, "count": 1, "ref": f"d{int(time.time())}",
                            "message": f"state {port['state'] or '?'}, physical state {port['phys_state'] or '?'}"})
            flaps = 0
            if prev is not None:
                if port["link_downed"] is not None and prev["link_downed"] is not None:
                    flaps = _increase(prev["link_downed"], port["link_downed"])
                elif active and key in self.down:
                    flaps = 1
                errors = {name: _increase(prev["counters"].get(name, 0), value)
                          for name, value in port["counters"].items()}
                errors = {name: n for name, n in errors.items() if n}
                if errors:
                    out.append({"kind": "ib_port_errors", **where, "count": sum(errors.values()),
                                "ref": "e" + ".".join(str(port["counters"][n]) for n in sorted(errors)),
                                "message": ", ".join(f"{n} +{v}" for n, v in sorted(errors.items()))})
            if flaps:
                out.append({"kind": "ib_link_flap", **where, "count": flaps, "ref": f"f{port['link_downed']}",
                            "message": f"link_downed +{flaps} (now {port['link_downed']})"})
            if active:
                self.down.discard(key)
            if active and port["rate_gbps"] < fastest:
                if self.slow.get(key) != port["rate_gbps"]:
                    self.slow[key] = port["rate_gbps"]
                    out.append({"kind": "ib_rate_degraded", **where, "count": 1, "ref": f"r{port['rate_gbps']}-{int(time.time())}",
                                "message": f"{port['rate_gbps']} Gb/s of {fastest} Gb/s"})
            elif active:
                self.slow.pop(key, None)
            self.last[key] = port
        return out


def _increase(before: int, now: int) -> int:
    return now - before if now >= before else now

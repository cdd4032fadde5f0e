"""The agent loop: enroll once, then heartbeat, poll commands (when the heartbeat counts some), execute, report."""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from . import __version__
from .backends.base import GpuBackend
from .client import ControlPlane, ControlPlaneError
from .executor import Executor, Journal
from .inventory import collect

log = logging.getLogger("gpucloud_agent")


class Agent:
    def __init__(self, backend: GpuBackend, control_plane: ControlPlane, state_dir: str | None = None):
        self.backend, self.cp = backend, control_plane
        self.state_dir = Path(state_dir) if state_dir else None
        self.executor = Executor(backend, Journal(self.state_dir / "journal.json" if self.state_dir else None))

    def enroll(self, token: str) -> dict:
        body = self.cp.enroll(token, collect(self.backend), __version__)
        if self.state_dir:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            cred = self.state_dir / "credential.json"
            cred.write_text(json.dumps({"url": self.cp.base, "credential": body["credential"], "host": body["host"]}))
            cred.chmod(0o600)
        return body

    def run_once(self, send_inventory: bool = False) -> list[dict]:
        """One cycle: heartbeat (optionally with inventory), then execute and report every pending command.

        The commands are fetched only when the heartbeat's answer counts some (`pending_commands` > 0, or an
        answer that does not say) or a health signal was just recorded (its effects may queue one), so an idle
        host costs the control plane one request per cycle."""
        send_inventory = self.new_boot() or send_inventory
        beat = self.cp.heartbeat(__version__, collect(self.backend) if send_inventory else None)
        pending = beat.get("pending_commands", 1) if isinstance(beat, dict) else 1
        recorded = self.report_health()
        reports = []
        if not pending and not recorded:
            return reports
        for command in self.cp.commands():
            outcome = self.executor.execute(command)
            self.cp.report(command["id"], outcome["succeeded"], outcome["result"], outcome["error"])
            reports.append({"id": command["id"], "kind": command["kind"], **outcome})
        return reports

    def new_boot(self) -> bool:
        """True once per boot of the host (the first cycle after it, and the first of this process): the cycle then
        sends the inventory, whose `boot_id` tells the control plane the host rebooted, at once rather than at the
        next periodic report. The last boot id is kept in the state directory (`boot_id`)."""
        try:
            current = self.backend.boot_id()
        except OSError:
            return False
        path = self.state_dir / "boot_id" if self.state_dir else None
        last = getattr(self, "_boot_id", None)
        if last is None and path is not None and path.exists():
            last = path.read_text().strip()
        self._boot_id = current
        if current == last:
            return False
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(current)
        return True

    def report_health(self) -> int:
        """Send every pending health signal, acknowledging each the control plane answered (recorded now or
        before) or refused as invalid (a 400 will not change on a re-send; it is logged); any other failure stays
        pending for the next cycle. Returns how many were recorded."""
        recorded = 0
        for event in self.backend.health_events():
            try:
                self.cp.health_event(event)
                recorded += 1
            except ControlPlaneError as exc:
                if exc.status != 400:
                    raise
                log.error("health event %s refused: %s", event["dedup_key"], exc.body)
            self.backend.health_events_ack([event["dedup_key"]])
        return recorded

    def run_forever(self, interval_s: float = 15.0, inventory_every: int = 20) -> None:  # pragma: no cover
        cycle = 0
        while True:
            try:
                self.run_once(send_inventory=cycle % inventory_every == 0)
            except Exception:  # keep the daemon alive; the control plane sees missed heartbeats
                log.exception("agent cycle failed")
            cycle += 1
            time.sleep(interval_s)

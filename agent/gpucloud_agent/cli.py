"""`gpucloud-agent` command line: discover | enroll | run."""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .agent import Agent
from .backends import get_backend
from .client import ControlPlane
from .inventory import collect


def _backend(args):
    if args.backend == "fake":
        state = str(Path(args.state) / "fake-driver.json") if getattr(args, "state", None) else None
        return get_backend("fake", host=args.fake_host, host_id=args.fake_host_id, state_path=state)
    return get_backend("nvml")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpucloud-agent")
    parser.add_argument("--backend", choices=["nvml", "fake"], default="nvml")
    parser.add_argument("--fake-host", default="hgx-h100", choices=["hgx-h100", "hgx-h200"])
    parser.add_argument("--fake-host-id", type=int, default=1)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("discover", help="print the inventory as JSON")
    enroll = sub.add_parser("enroll", help="exchange a one-time token for a credential")
    enroll.add_argument("--url", required=True)
    enroll.add_argument("--token", required=True)
    enroll.add_argument("--state", required=True, help="state directory (credential, journal)")
    run = sub.add_parser("run", help="heartbeat and execute commands")
    run.add_argument("--state", required=True)
    run.add_argument("--once", action="store_true")
    run.add_argument("--interval", type=float, default=15.0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    backend = _backend(args)
    if args.cmd == "discover":
        json.dump(collect(backend), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    if args.cmd == "enroll":
        body = Agent(backend, ControlPlane(args.url), args.state).enroll(args.token)
        print(f"enrolled as host {body['host']}")
        return 0
    saved = json.loads((Path(args.state) / "credential.json").read_text())
    url = saved["url"].removesuffix("/api/v1/agent")
    agent = Agent(backend, ControlPlane(url, saved["credential"]), args.state)
    if args.once:
        print(json.dumps(agent.run_once(send_inventory=True)))
        return 0
    agent.run_forever(args.interval)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

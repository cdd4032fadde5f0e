"""`gpucloud-agent` command line: discover | enroll | run (fake backend: inject | diag-set)."""
from __future__ import annotations

import argparse
import json
import logging
import secrets
import socket
import sys
from pathlib import Path

from .agent import Agent
from .backends import get_backend
from .client import ControlPlane
from .inventory import collect


def _fake_identity(args) -> int | str:
    """The fake host's identity: `--fake-host-id` when given; else an id made once and kept in the state
    directory (`fake-host-id`), so every state directory is its own machine with its own GPU UUIDs and HCA port
    GUIDs and `enroll` then `run` see the same one; without a state directory (`discover`), the hostname."""
    if args.fake_host_id is not None:
        return args.fake_host_id
    state = getattr(args, "state", None)
    if not state:
        return socket.gethostname()
    path = Path(state) / "fake-host-id"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_hex(8) + "\n")
    return path.read_text().strip()


def _backend(args):
    if args.backend == "fake":
        state = str(Path(args.state) / "fake-driver.json") if getattr(args, "state", None) else None
        return get_backend("fake", host=args.fake_host, host_id=_fake_identity(args), state_path=state)
    return get_backend("nvml")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpucloud-agent")
    parser.add_argument("--backend", choices=["nvml", "fake"], default="nvml")
    parser.add_argument("--fake-host", default="hgx-h100", choices=["hgx-h100", "hgx-h200"])
    parser.add_argument("--fake-host-id", type=int, default=None,
                        help="fake backend: the host's number (default: an id kept in --state, else the hostname)")
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
    inject = sub.add_parser("inject", help="fake backend: queue a health signal for the next run to report")
    inject.add_argument("--state", required=True)
    inject.add_argument("--kind", default="", help="xid, ecc_dbe, ecc_sbe, nvlink_down, ... (docs/health.md)")
    inject.add_argument("--xid", type=int)
    inject.add_argument("--gpu", type=int)
    inject.add_argument("--hca-device", default="")
    inject.add_argument("--hca-port", type=int, help="HCA port number (default 1)")
    inject.add_argument("--nvswitch", default="", help="NVSwitch PCI address (kinds nvswitch_*; --xid: the SXid)")
    inject.add_argument("--nvswitch-port", type=int, help="NVSwitch port (link) number")
    inject.add_argument("--kernel-log", default="",
                        help="a kernel log line instead of --kind: an NVSwitch SXid line as the driver prints it")
    inject.add_argument("--count", type=int, default=1)
    diag = sub.add_parser("diag-set", help="fake backend: what the next return-to-service checks answer")
    diag.add_argument("--state", required=True)
    diag.add_argument("--result", default="pass", choices=["pass", "fail", "error"])
    diag.add_argument("--error", action="append", default=[], help="an error the tool logged (repeatable)")
    diag.add_argument("--times", type=int, default=0, help="how many checks answer so (0: until set again)")
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
    if args.cmd == "inject":
        if args.backend != "fake":
            parser.error("inject needs --backend fake (a real driver raises its own signals)")
        if bool(args.kind) == bool(args.kernel_log):
            parser.error("inject needs --kind or --kernel-log (one of them)")
        if args.kernel_log:
            event = backend.inject_kernel_log(args.kernel_log)
            if event is None:
                parser.error("--kernel-log: not an NVSwitch SXid line")
        else:
            event = backend.inject(args.kind, xid=args.xid, gpu=args.gpu, hca_device=args.hca_device,
                                   hca_port_number=args.hca_port, nvswitch=args.nvswitch,
                                   nvswitch_port=args.nvswitch_port, count=args.count)
        print(json.dumps(event))
        return 0
    if args.cmd == "diag-set":
        if args.backend != "fake":
            parser.error("diag-set needs --backend fake")
        backend.set_diagnostics(args.result, args.error, args.times)
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

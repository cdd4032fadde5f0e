"""Node agents for the demo service's sample fleet (`make run`), so its GPU instances can reach `active`.

    python -m tests.e2e.agents --url http://127.0.0.1:8000 --staff-token "$OPS" [--mig-host a-su2-n32]

Like `tests/e2e/stack.py` in the end-to-end test: every host the control plane queues a command for gets an agent
(the real agent's client and executor on its fake HGX H100 driver), enrolled with a one-time token through the
staff API. `--mig-host` first enrolls that host with its GPUs in MIG mode and SR-IOV VFs enabled, which the MIG
flavors need. Runs until Ctrl-C. Sample-fleet hosts `a-su<1|2>-n<NN>` only (HGX H100).
"""
from __future__ import annotations

import argparse
import time

from .stack import Agents, Api


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--staff-token", required=True, help="a staff operator token (create_api_token --staff)")
    parser.add_argument("--mig-host", action="append", default=[], help="enable MIG mode on this host first")
    args = parser.parse_args()
    ops, agents = Api(args.url, args.staff_token), Agents(args.url)
    for host in args.mig_host:
        agents.start(ops, host, mig=True)
        print(f"agent enrolled on {host} (MIG mode, SR-IOV VFs)", flush=True)
    stop = agents.follow_commands(ops)
    print("following agent commands; Ctrl-C to stop", flush=True)
    known: set[str] = set(args.mig_host)
    try:
        while True:
            for name in sorted(set(agents.agents) - known):
                print(f"agent enrolled on {name}", flush=True)
                known.add(name)
            time.sleep(1)
    except KeyboardInterrupt:
        stop.set()
        agents.stop()


if __name__ == "__main__":
    main()

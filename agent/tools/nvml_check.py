"""Read-only check of the agent's NVML backend and the GPU catalog on a real NVIDIA host.

Usage: PYTHONPATH=agent python3 agent/tools/nvml_check.py [--catalog apps/inventory/catalog] [--out DIR] [--signals]

Prints the inventory the agent would report (`gpucloud_agent.inventory.collect` on `NvmlBackend`) and, per GPU,
compares the driver's MIG GPU-instance profiles (NVML `nvmlDeviceGetGpuInstanceProfileInfo` per profile index, and
`nvmlDeviceGetGpuInstancePossiblePlacements` per profile) with the catalog entry of the GPU's model: profile id,
compute slices, memory size, maximum instances and allowed start slices. Changes nothing on the GPU. The last line
is one JSON object: {"gpus": n, "model": key, "profiles_checked": n, "mismatches": [...], "mig_query": "ok"|error}.
With `--signals` it also reads the health signals as the agent does (`NvmlBackend.health_read`: XID event set,
volatile ECC counts, remapped rows, NVLink states, PCIe link, clock event reasons, GPU fabric state and status,
temperature, power; for the host: NVSwitch SXid lines of the kernel log (`/dev/kmsg`, needs root or CAP_SYSLOG),
the Fabric Manager service on NVSwitch systems, InfiniBand port state, rate and error counters from sysfs), prints
the values read per GPU and for the host and the events the agent would send, and adds ``"signals"`` (per GPU),
``"host_signals"`` and ``"events"`` to the last line. Nothing is injected and nothing is sent. InfiniBand counter
deltas need two reads, so one run reports only ports that are down or slower than the host's fastest.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml
from gpucloud_agent.backends.nvml import MODEL_KEYS, NvmlBackend
from gpucloud_agent.inventory import collect


def _placements(nv, handle, profile_id: int) -> list[int]:
    """Allowed start slices of a GPU-instance profile (NVML's possible placements; C-style call in nvidia-ml-py)."""
    import ctypes

    if hasattr(nv, "nvmlDeviceGetGpuInstancePossiblePlacements_v2"):
        return sorted(p.start for p in nv.nvmlDeviceGetGpuInstancePossiblePlacements_v2(handle, profile_id))
    count = ctypes.c_uint(0)
    nv.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, None, ctypes.byref(count))
    array = (nv.c_nvmlGpuInstancePlacement_t * max(count.value, 1))()
    nv.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, array, ctypes.byref(count))
    return sorted(array[i].start for i in range(count.value))


def _driver_profiles(nv, handle) -> tuple[dict, str]:
    profiles, status = {}, "ok"
    for index in range(getattr(nv, "NVML_GPU_INSTANCE_PROFILE_COUNT", 16)):
        try:
            info = nv.nvmlDeviceGetGpuInstanceProfileInfo(handle, index)
        except nv.NVMLError as exc:
            if "Not Supported" not in str(exc) and "Invalid Argument" not in str(exc):
                status = f"profile index {index}: {exc}"
            continue
        try:
            starts = _placements(nv, handle, info.id)
        except (nv.NVMLError, AttributeError, TypeError) as exc:
            starts = f"unavailable: {exc}"
        profiles[info.id] = {"index": index, "slices": info.sliceCount, "max": info.instanceCount,
                             "memory_mib": info.memorySizeMB, "starts": starts}
    if not profiles and status == "ok":
        status = "no profiles reported (MIG mode off or not supported here)"
    return profiles, status


def _compare(catalog: dict, driver: dict) -> list[str]:
    problems = []
    for p in catalog.get("mig", {}).get("profiles", []):
        got = driver.get(p["id"])
        if got is None:
            problems.append(f"profile {p['id']} {p['name']}: not reported by the driver")
            continue
        if got["slices"] != p["compute"]:
            problems.append(f"profile {p['id']} {p['name']}: compute slices {got['slices']} != {p['compute']}")
        if got["max"] != p["max"]:
            problems.append(f"profile {p['id']} {p['name']}: max instances {got['max']} != {p['max']}")
        if isinstance(got["starts"], list) and got["starts"] != sorted(p["starts"]):
            problems.append(f"profile {p['id']} {p['name']}: starts {got['starts']} != {sorted(p['starts'])}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--catalog", default="apps/inventory/catalog")
    ap.add_argument("--out", default="")
    ap.add_argument("--signals", action="store_true", help="read the health signals too (read-only)")
    args = ap.parse_args(argv)
    backend = NvmlBackend()
    inventory = collect(backend)
    print(json.dumps(inventory, indent=1, default=str))
    nv = backend.nv
    mismatches, checked, status, model = [], 0, "ok", ""
    for index in range(nv.nvmlDeviceGetCount()):
        handle = nv.nvmlDeviceGetHandleByIndex(index)
        name = nv.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else name
        model = MODEL_KEYS.get(name, name)
        path = Path(args.catalog) / f"{model}.yaml"
        driver, status = _driver_profiles(nv, handle)
        print(f"GPU {index} {name} -> {model}: driver MIG profiles {json.dumps(driver, default=str)}")
        if not path.exists():
            mismatches.append(f"GPU {index}: no catalog entry for {name!r}")
            continue
        catalog = yaml.safe_load(path.read_text())
        memory = inventory["gpus"][index].get("memory_mib")
        if memory and abs(memory - catalog.get("memory_mib", 0)) > 1024:
            mismatches.append(f"GPU {index}: memory {memory} MiB vs catalog {catalog.get('memory_mib')}")
        if driver:
            checked += len(driver)
            mismatches += [f"GPU {index}: {m}" for m in _compare(catalog, driver)]
    result = {"gpus": len(inventory["gpus"]), "model": model, "profiles_checked": checked,
              "mismatches": mismatches, "mig_query": status}
    if args.signals:
        result["signals"] = backend.health_read()
        result["host_signals"] = backend.host_read
        result["events"] = backend.health_events()
        print(f"health signals read: {json.dumps(result['signals'], default=str)}")
        print(f"host signals read: {json.dumps(result['host_signals'], default=str)}")
    if args.out:
        Path(args.out, "inventory.json").write_text(json.dumps(inventory, indent=1, default=str))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

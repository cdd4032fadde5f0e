"""A refusal's reasons in a person's words, from its explanation (`Explanation.as_dict`).

One reason per filter that removed hosts: a stable ``code`` (the filter's name, as in the explanation's
``filters``: scripts keep matching on it), ``hosts`` (how many it removed) and a ``message`` for a tenant::

    {"code": "gpu_model", "hosts": 74, "message": "74 hosts have a different GPU model"}
    {"code": "vf_capacity", "hosts": 8, "message": "8 hosts have no free vGPU VF"}

The words name no host, no GPU and nothing of another tenant beyond a count (the explanation's raw reasons stay
for scripts and staff). A host filter of another app (`register_host_filter`) brings its own words; one without
them is worded from its most frequent reason.
"""
from __future__ import annotations

import re
from collections.abc import Callable

#: ``words(reasons) -> predicate``: the filter's reasons (phrase -> hosts) to the words after "<n> hosts", with
#: ``{are}``, ``{have}``, ``{run}``, ``{hold}`` for the verb in the count's number ("8 hosts have ...").
Words = Callable[[dict[str, int]], str]

_MODES = {"exclusive": "whole GPUs", "mig": "MIG slices", "vgpu": "vGPUs", "shared": "shared GPUs"}


def _top(reasons: dict[str, int]) -> str:
    return max(reasons.items(), key=lambda kv: kv[1])[0] if reasons else ""


def _mode(reasons: dict[str, int]) -> str:
    mode = _top(reasons).removeprefix("no GPU in ").removesuffix(" mode")
    return f"{{have}} no GPU set up for {_MODES.get(mode, mode)}"


def _mig(reasons: dict[str, int]) -> str:
    top = _top(reasons)
    if "does not support MIG" in top:
        return "{have} GPUs that do not support MIG"
    if "does not exist" in top:
        return "{have} GPUs without this MIG profile"
    return "{have} no GPU with room for the MIG slice"


_WORDS: dict[str, Words] = {
    "host_state": lambda r: "{are} out of service",
    "provisioning_kind": lambda r: ("{are} for bare-metal servers only" if _top(r) == "baremetal"
                                    else "{are} for virtual machines only"),
    "zone": lambda r: "{are} in another zone",
    "host": lambda r: "{are} not the requested host",
    "lease_holding": lambda r: "{hold} none of the lease's GPUs",
    "tenant_isolation": lambda r: ("{are} dedicated to other customers" if _top(r).startswith("dedicated")
                                   else "{run} other customers' work (this flavor needs a host of its own)"),
    "affinity": lambda r: "{run} no member of the affinity group",
    "anti_affinity": lambda r: "already {run} a member of the anti-affinity group",
    "gpu_model": lambda r: ("{have} a different GPU model, or fewer of its GPUs than the flavor needs"
                            if _top(r).startswith("fewer") else "{have} a different GPU model"),
    "gpu_mode": _mode,
    "gpu_health": lambda r: "{have} too few healthy GPUs ready",
    "gpu_capacity": lambda r: "{have} too few free GPUs",
    "vcpu": lambda r: "{have} too few free vCPUs" if _top(r).endswith("free") else "{have} fewer vCPUs than the flavor needs",
    "memory": lambda r: ("{have} too little free memory" if _top(r).endswith("free")
                         else "{have} less memory than the flavor needs"),
    "nvswitch_partition": lambda r: "{have} no free NVSwitch partition of the flavor's size",
    "mig_geometry": _mig,
    "vgpu_capacity": lambda r: ("{have} GPUs without this vGPU type" if "does not exist" in _top(r)
                                else "{have} no GPU with room for another vGPU of this type"),
    "share_capacity": lambda r: "{have} no GPU with the share free",
    "vf_capacity": lambda r: "{have} no free vGPU VF",
}


def register_reason_words(filter_name: str, words: Words) -> None:
    """The words of another app's host filter (`register_host_filter`) in a refusal's reasons."""
    _WORDS[filter_name] = words


def _hosts(n: int) -> str:
    return f"{n} host{'' if n == 1 else 's'}"


def _verbs(n: int) -> dict[str, str]:
    one = n == 1
    return {"are": "is" if one else "are", "have": "has" if one else "have", "run": "runs" if one else "run",
            "hold": "holds" if one else "hold"}


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def placement_reasons(explanation: dict | None) -> list[dict]:
    """The reasons of a placement refusal (module doc), in the explanation's filter order: ``[{"code", "hosts",
    "message"}]``; ``no_hosts`` when the fleet offers no host at all; [] for an empty explanation."""
    if not explanation:
        return []
    if explanation.get("hosts_considered") == 0 and not any(f.get("removed") for f in explanation.get("filters", [])):
        return [{"code": "no_hosts", "hosts": 0, "message": "No host of the fleet offers this"}]
    out = []
    for f in explanation.get("filters", []):
        n, name, reasons = f.get("removed") or 0, f["filter"], f.get("reasons") or {}
        if not n:
            continue
        if name == "topology":   # about the set of hosts, not each host: its own reason ("only 3 suitable hosts for 4")
            top = _top(reasons)
            few = re.fullmatch(r"only (\d+) suitable hosts for (\d+)", top)
            message = (f"only {_hosts(int(few[1])).replace('host', 'suitable host')} for the {few[2]} needed"
                       if few else top or "no set of hosts meets the network limits")
        elif name in _WORDS:
            message = f"{_hosts(n)} " + _WORDS[name](reasons).format(**_verbs(n))
        else:
            message = f"{_hosts(n)}: {_top(reasons) or name}"
        out.append({"code": name, "hosts": n, "message": _sentence(message)})
    return out

"""The return-to-service check: DCGM diagnostics where DCGM is installed, a configured validation command otherwise.

Both answer the same shape, which the control plane stores with the repair (docs/health.md, "Repair"):

    {"tool": "dcgm" | "command", "tool_version": str, "result": "pass" | "fail" | "error",
     "errors": [str], "warnings": [str], "exit_code": int, "output_tail": str (last 4,000 characters)}

The control plane, not the agent, decides: a check passes only when ``result`` is ``pass`` *and* ``errors`` is
empty, so a tool that says PASS after logging errors counts as a failure.

DCGM: ``dcgmi diag -r <level> -j [-i <gpu ids>]`` (DCGM User Guide, "Diagnostics"); the JSON report holds, per
test, a result per GPU (``Pass``, ``Fail``, ``Warn``, ``Skip``) and any ``warnings`` / ``error`` text. The parser
walks the report instead of binding to one DCGM version's layout: every ``status`` / ``result`` value counts, every
``error`` / ``errors`` text is an error, every ``warnings`` / ``warning`` text a warning. ``dcgmi --version``
gives the tool version.

The validation command (a site's own burn-in, e.g. a short NCCL all-reduce or a GEMM self-test) is run with
``GPUCLOUD_GPU_INDEXES`` set (comma-separated; empty: every GPU): exit 0 is ``pass``; lines of its output that
start with ``ERROR`` are errors (so a command that exits 0 after printing one fails); ``GPUCLOUD_TOOL_VERSION=``
on a line of its output names its version.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess

TAIL = 4000
FAIL_WORDS = {"fail", "failed", "failure", "error"}


def _walk(node, out: dict) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            k = key.lower()
            if k in ("status", "result") and isinstance(value, str):
                out["statuses"].append(value)
            elif k in ("error", "errors") and value:
                out["errors"].extend(_texts(value))
            elif k in ("warning", "warnings") and value:
                out["warnings"].extend(_texts(value))
            else:
                _walk(value, out)
    elif isinstance(node, list):
        for item in node:
            _walk(item, out)


def _texts(value) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, dict):
        text = value.get("message") or value.get("warning") or value.get("error") or json.dumps(value)
        return [str(text)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return [str(value)]


def dcgm_report_parse(text: str) -> dict:
    """``{"result", "errors", "warnings", "tool_version"}`` of a ``dcgmi diag -j`` report. ``error`` when it is
    not JSON; ``fail`` when any test says fail; else ``pass`` (when at least one test passed) or ``error``."""
    try:
        doc = json.loads(text)
    except ValueError:
        return {"result": "error", "errors": ["the DCGM report is not JSON"], "warnings": [], "tool_version": ""}
    found: dict = {"statuses": [], "errors": [], "warnings": []}
    _walk(doc, found)
    statuses = {s.strip().lower() for s in found["statuses"]}
    if statuses & FAIL_WORDS:
        result = "fail"
    elif "pass" in statuses:
        result = "pass"
    else:
        result = "error"
    version = doc.get("version", "") if isinstance(doc, dict) else ""
    return {"result": result, "errors": found["errors"], "warnings": found["warnings"],
            "tool_version": str(version or "")}


def _run(argv: list[str], env: dict | None = None, timeout: int = 3600) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, **(env or {})})
    except FileNotFoundError as exc:
        return 127, str(exc)
    except subprocess.TimeoutExpired as exc:
        return 124, f"timed out after {timeout} s: {exc.stdout or ''}"
    return proc.returncode, (proc.stdout or "") + (proc.stderr or "")


def run_dcgm(gpu_indexes: list[int], level: int, dcgmi: str = "dcgmi") -> dict:
    argv = [dcgmi, "diag", "-r", str(level), "-j"]
    if gpu_indexes:
        argv += ["-i", ",".join(str(i) for i in gpu_indexes)]
    code, out = _run(argv)
    parsed = dcgm_report_parse(out[out.find("{"):] if "{" in out else out)
    vcode, vout = _run([dcgmi, "--version"], timeout=30)
    version = parsed["tool_version"] or next(
        (ln.split(":", 1)[1].strip() for ln in vout.splitlines() if "version" in ln.lower() and ":" in ln), "")
    result = parsed["result"] if code == 0 or parsed["result"] == "fail" else "error"
    return {"tool": "dcgm", "tool_version": version, "result": result, "errors": parsed["errors"],
            "warnings": parsed["warnings"], "exit_code": code, "output_tail": out[-TAIL:]}


def run_command(command: str, gpu_indexes: list[int]) -> dict:
    code, out = _run(["/bin/sh", "-c", command],
                     env={"GPUCLOUD_GPU_INDEXES": ",".join(str(i) for i in gpu_indexes)})
    errors = [ln.strip() for ln in out.splitlines() if ln.strip().upper().startswith("ERROR")]
    version = next((ln.split("=", 1)[1].strip() for ln in out.splitlines()
                    if ln.startswith("GPUCLOUD_TOOL_VERSION=")), "")
    return {"tool": "command", "tool_version": version, "result": "pass" if code == 0 else "fail",
            "errors": errors, "warnings": [], "exit_code": code, "output_tail": out[-TAIL:]}


def run_check(gpu_indexes: list[int], level: int, validation_command: str = "", dcgmi: str = "dcgmi") -> dict:
    """DCGM when `dcgmi` is on the PATH, else `validation_command`; with neither, ``error`` (never a pass)."""
    if shutil.which(dcgmi):
        return run_dcgm(gpu_indexes, level, dcgmi)
    if validation_command:
        return run_command(validation_command, gpu_indexes)
    return {"tool": "none", "tool_version": "", "result": "error",
            "errors": ["no DCGM (dcgmi) and no validation command configured"], "warnings": [], "exit_code": -1,
            "output_tail": ""}

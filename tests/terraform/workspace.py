"""A Terraform working directory driven by the tests and the benchmark: the provider from the filesystem mirror
that `make terraform-provider` builds, an explicit CLI config file (never ~/.terraformrc), a writable HOME, no
prompts, no colour."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.e2e.stack import ROOT

TF_DIR = ROOT / "terraform"
TERRAFORM = shutil.which("terraform") or "/usr/local/bin/terraform"
ESTATE = TF_DIR / "examples" / "estate" / "main.tf"


def require_provider() -> None:
    """The mirror and CLI config exist (make terraform-provider); built here when missing."""
    if not (TF_DIR / "gpucloud.tfrc").exists() or not (TF_DIR / "mirror").exists():
        subprocess.run([str(TF_DIR / "build.sh")], check=True, capture_output=True, timeout=600)


class Workspace:
    def __init__(self, env: dict, name: str = "ws"):
        self.dir = Path(tempfile.mkdtemp(prefix=f"gpc-tf-{name}-"))
        home = self.dir / "home"
        home.mkdir()
        self.env = {**os.environ, "TF_CLI_CONFIG_FILE": str(TF_DIR / "gpucloud.tfrc"), "TF_IN_AUTOMATION": "1",
                    "TF_INPUT": "0", "HOME": str(home), "CHECKPOINT_DISABLE": "1", **env}
        self.env.pop("TF_LOG", None)
        self.vars: dict = {}

    def write(self, main_tf: str, name: str = "main.tf") -> None:
        (self.dir / name).write_text(main_tf)

    def remove(self, name: str) -> None:
        (self.dir / name).unlink(missing_ok=True)

    def _args(self, *args: str) -> list[str]:
        (self.dir / "terraform.tfvars.json").write_text(json.dumps(self.vars))
        return [TERRAFORM, *args]

    def run(self, *args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
        t0 = time.monotonic()
        r = subprocess.run(self._args(*args), cwd=self.dir, env={**self.env, **(env or {})}, capture_output=True,
                           text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        r.elapsed = time.monotonic() - t0
        r.out = r.stdout + r.stderr
        return r

    def ok(self, *args: str, **kw) -> subprocess.CompletedProcess:
        r = self.run(*args, **kw)
        assert r.returncode == 0, f"terraform {' '.join(args)} exited {r.returncode}:\n{r.out[-6000:]}"
        return r

    def start(self, *args: str) -> subprocess.Popen:
        """Start terraform in its own process group (so a kill takes the provider plugin with it)."""
        return subprocess.Popen(self._args(*args), cwd=self.dir, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL,
                                start_new_session=True)

    @staticmethod
    def kill(p: subprocess.Popen) -> None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)

    def state(self) -> dict:
        r = self.ok("show", "-json")
        return json.loads(r.stdout)

    def managed(self) -> dict[str, dict]:
        vals = self.state().get("values") or {}
        return {r["address"]: r["values"] for r in (vals.get("root_module") or {}).get("resources", [])
                if r["mode"] == "managed"}

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

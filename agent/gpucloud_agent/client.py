"""HTTP client for the control plane's agent endpoints (`/api/v1/agent/...`)."""
from __future__ import annotations

import requests


class ControlPlaneError(Exception):
    def __init__(self, status: int, body: dict | str):
        super().__init__(f"HTTP {status}: {body}")
        self.status, self.body = status, body


class ControlPlane:
    def __init__(self, base_url: str, credential: str | None = None, timeout: float = 30.0,
                 session: requests.Session | None = None):
        self.base = base_url.rstrip("/") + "/api/v1/agent"
        self.credential, self.timeout = credential, timeout
        self.http = session or requests.Session()

    def _request(self, method: str, path: str, json: dict | None = None, auth: bool = True):
        headers = {"Authorization": f"Agent {self.credential}"} if auth and self.credential else {}
        resp = self.http.request(method, f"{self.base}/{path}", json=json, headers=headers, timeout=self.timeout)
        try:
            body = resp.json()
        except ValueError:
            body = resp.text
        if resp.status_code >= 400:
            raise ControlPlaneError(resp.status_code, body)
        return body

    def enroll(self, token: str, inventory: dict, agent_version: str) -> dict:
        body = self._request("POST", "enroll", {"token": token, "inventory": inventory,
                                                "agent_version": agent_version}, auth=False)
        self.credential = body["credential"]
        return body

    def heartbeat(self, agent_version: str, inventory: dict | None = None) -> dict:
        payload = {"agent_version": agent_version}
        if inventory is not None:
            payload["inventory"] = inventory
        return self._request("POST", "heartbeat", payload)

    def health_event(self, event: dict) -> dict:
        """Report one health signal; a re-send with the same dedup_key answers the stored event (200)."""
        return self._request("POST", "health-events", {k: v for k, v in event.items() if v not in (None, "")})

    def commands(self) -> list[dict]:
        return self._request("GET", "commands")

    def report(self, command_id: str, succeeded: bool, result: dict, error: str = "") -> dict:
        return self._request("POST", f"commands/{command_id}/result",
                             {"succeeded": succeeded, "result": result, "error": error})

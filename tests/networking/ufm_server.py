"""A small contract server for UFM's P_Key REST API, written from NVIDIA's published "PKey GUIDs REST API" pages
(UFM Enterprise REST API Guide): in-memory P_Keys, HTTP basic auth, the documented validation (P_Key a hex string
strictly between 0x0 and 0x7fff; GUIDs hex strings of 16-20 characters; membership full|limited; `memberships`
as long as `guids`), on 127.0.0.1 only. It records every request so tests can count writes.
"""
from __future__ import annotations

import base64
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_HEX = re.compile(r"^(0x)?[0-9a-fA-F]+$")


class UfmState:
    def __init__(self, username: str, password: str):
        self.auth = "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()
        self.pkeys: dict[int, dict] = {}
        self.log: list[tuple[str, str]] = []
        self.lock = threading.Lock()


def _pkey(text) -> int | None:
    if not isinstance(text, str) or not _HEX.match(text):
        return None
    value = int(text, 16)
    return value if 0 < value < 0x7FFF else None


def _guids(values) -> list[str] | None:
    if not isinstance(values, list) or not values:
        return None
    out = []
    for g in values:
        raw = str(g).lower().removeprefix("0x")
        if not (16 <= len(str(g)) <= 20 and _HEX.match(raw)):
            return None
        out.append(raw.rjust(16, "0"))
    return out


class Handler(BaseHTTPRequestHandler):
    state: UfmState

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, status: int, body=None) -> None:
        data = json.dumps(body if body is not None else {}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict | None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            return json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            return None

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") != self.state.auth:
            self._send(401, {"error": "unauthorized"})
            return False
        return True

    def _view(self, key: int, guids: bool, qos: bool) -> dict:
        row = self.state.pkeys[key]
        out = {"partition": row["partition"], "ip_over_ib": row["ip_over_ib"]}
        if guids:
            out["guids"] = [{"guid": g, "membership": m, "index0": row["index0"]} for g, m in sorted(row["guids"].items())]
        if qos:
            out["qos_conf"] = dict(row["qos"])
        return out

    def do_GET(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        path, _, query = self.path.partition("?")
        guids, qos = "guids_data=true" in query, "qos_conf=true" in query
        with self.state.lock:
            self.state.log.append(("GET", self.path))
            if path.rstrip("/") == "/ufmRest/resources/pkeys":
                return self._send(200, {f"0x{k:x}": self._view(k, guids, qos) for k in sorted(self.state.pkeys)})
            match = re.fullmatch(r"/ufmRest/resources/pkeys/([^/]+)", path)
            key = _pkey(match.group(1)) if match else None
            if key is None:
                return self._send(404, {"error": "not found"})
            return self._send(200, self._view(key, guids, qos) if key in self.state.pkeys else {})

    def do_POST(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        body = self._body()
        with self.state.lock:
            self.state.log.append(("POST", self.path))
            if body is None:
                return self._send(400, {"error": "bad json"})
            key = _pkey(body.get("pkey"))
            if key is None:
                return self._send(400, {"error": "pkey must be a hex string between 0x0 and 0x7fff exclusive"})
            if self.path.rstrip("/") == "/ufmRest/resources/pkeys/add":
                if key in self.state.pkeys:
                    return self._send(400, {"error": "pkey exists"})
                self.state.pkeys[key] = {
                    "partition": body.get("partition_name", f"management_{key:x}"), "guids": {},
                    "ip_over_ib": bool(body.get("ip_over_ib", True)), "index0": bool(body.get("index0", False)),
                    "qos": {"mtu_limit": body.get("mtu_limit", 2), "service_level": body.get("service_level", 0),
                            "rate_limit": body.get("rate_limit", 2.5)}}
                return self._send(200, {})
            if self.path.rstrip("/") == "/ufmRest/resources/pkeys":
                return self._add_guids(key, body)
            return self._send(404, {"error": "not found"})

    def _add_guids(self, key: int, body: dict) -> None:
        guids = _guids(body.get("guids"))
        if guids is None:
            return self._send(400, {"error": "guids: list of 16-20 character hex strings"})
        memberships = body.get("memberships")
        if memberships is not None and "membership" in body:
            return self._send(400, {"error": "membership and memberships conflict"})
        if memberships is None:
            memberships = [body.get("membership", "full")] * len(guids)
        if len(memberships) != len(guids) or any(m not in ("full", "limited") for m in memberships):
            return self._send(400, {"error": "memberships must match guids, each full or limited"})
        row = self.state.pkeys.setdefault(key, {
            "partition": f"management_{key:x}", "guids": {}, "ip_over_ib": bool(body.get("ip_over_ib", True)),
            "index0": bool(body.get("index0", False)), "qos": {"mtu_limit": 2, "service_level": 0, "rate_limit": 2.5}})
        row["guids"].update(dict(zip(guids, memberships, strict=True)))
        return self._send(200, {})

    def do_DELETE(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        with self.state.lock:
            self.state.log.append(("DELETE", self.path))
            match = re.fullmatch(r"/ufmRest/resources/pkeys/([^/]+)(?:/guids/([^/]+))?", self.path)
            key = _pkey(match.group(1)) if match else None
            if key is None or key not in self.state.pkeys:
                return self._send(404, {"error": "pkey not found"})
            if match.group(2):
                guids = _guids(match.group(2).split(","))
                if guids is None:
                    return self._send(400, {"error": "bad guids"})
                for g in guids:
                    self.state.pkeys[key]["guids"].pop(g, None)
            else:
                del self.state.pkeys[key]
            return self._send(200, {})


class UfmContractServer:
    def __init__(self, username: str = "admin", password: str = "contract-test"):
        self.state = UfmState(username, password)
        handler = type("BoundHandler", (Handler,), {"state": self.state})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> UfmContractServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def writes(self) -> int:
        return sum(1 for method, _ in self.state.log if method != "GET")

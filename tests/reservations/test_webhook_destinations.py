"""Webhook destinations: an organization owner cannot make the control plane call its own network (SSRF).

Found when the product was probed as a tenant: an owner registered `http://127.0.0.1:…` and
`http://169.254.169.254/…` (the cloud metadata service) and the worker POSTed there. Loopback, link-local,
private, multicast, reserved and unspecified destinations are refused at registration and again, on the address
the name resolves to then, at delivery (a DNS answer that changes in between, DNS rebinding, is caught); only
http(s) on the allowed ports; an operator opens specific networks with `WEBHOOK_ALLOWED_NETWORKS`.

No test here sends traffic to a refused address: `socket.connect` is replaced by a recorder that fails the test,
and host names resolve only through the `dns` table (tests/conftest.py).
"""
import socket
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from apps.core.outbound import DestinationRefused, destination_check
from apps.reservations.models import Notification, WebhookEndpoint
from apps.reservations.services.notify import event_record, notifications_deliver

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_connect(monkeypatch):
    """Any connection attempt fails the test (and is recorded)."""
    attempts = []

    def refuse(sock, address, *args):
        attempts.append(address)
        raise AssertionError(f"a connection to {address} was opened")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


def _register(world, url):
    return world.client_b.post("/api/v1/webhooks", {"organization": str(world.org_b.pk), "url": url},
                               format="json")


REFUSED = [
    "http://127.0.0.1:8000/hook", "http://localhost.:9/x", "http://[::1]/hook", "http://2130706433/",
    "http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://10.0.0.5/", "http://192.168.1.1/",
    "http://172.16.0.1/", "http://100.64.0.1/", "http://[fd00::1]/", "http://224.0.0.1/", "http://0.0.0.0/",
    "http://240.0.0.1/", "http://[::ffff:127.0.0.1]/", "https://hooks.example:22/", "ftp://hooks.example/",
    "gopher://127.0.0.1/", "http://user:pw@hooks.example/", "https:///nohost", "http://0x7f.1/", "http://127.1/",
    "http://[fec0::1]/", "http://[feff::1]/", "http://[2002:7f00:1::]/", "http://[2002:a9fe:a9fe::1]/",
    "http://[::7f00:1]/", "http://[::a00:5]/", "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
]


@pytest.mark.django_db(transaction=False)
@pytest.mark.parametrize("url", REFUSED)
def test_the_destination_check_refuses_internal_destinations(dns, no_connect, url):
    dns["localhost."] = ["127.0.0.1"]
    with pytest.raises(DestinationRefused) as exc:
        destination_check(url)
    assert exc.value.status == 400 and exc.value.code == "webhook_destination_refused" and exc.value.errors["url"]
    assert no_connect == []


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/hook", "http://169.254.169.254/latest/meta-data/",
                                 "http://[::1]/hook", "http://10.0.0.5/", "http://[fec0::1]/",
                                 "http://[2002:7f00:1::]/"])
def test_registration_refuses_internal_destinations(world, no_connect, url):
    r = _register(world, url)
    assert (r.status_code, r.json()["code"]) == (400, "webhook_destination_refused"), r.content
    assert r.json()["errors"]["url"]
    assert not WebhookEndpoint.objects.exists() and no_connect == []


def test_public_destinations_pass_the_check(dns, settings):
    dns["hooks.example"] = ["93.184.216.34", "2606:4700::1111"]
    settings.WEBHOOK_ALLOWED_PORTS = [443, 8443]
    for url in ("https://hooks.example/h", "https://hooks.example:8443/h", "https://93.184.216.34/h",
                "https://unresolvable.example/h", "https://[2002:5db8:d822::1]/h", "https://[2606:4700::1111]/h"):
        destination_check(url)


def test_a_name_that_resolves_inside_is_refused_at_registration(world, dns, no_connect):
    dns["metadata.example"] = ["93.184.216.35", "169.254.169.254"]  # one bad address is enough
    r = _register(world, "https://metadata.example/hook")
    assert (r.status_code, r.json()["code"]) == (400, "webhook_destination_refused")
    assert "169.254.169.254" in r.json()["detail"] and no_connect == []


def test_rebinding_to_loopback_is_refused_at_delivery_before_connecting(world, dns, no_connect):
    dns["hooks.example"] = ["93.184.216.34"]
    r = _register(world, "https://hooks.example/hook")
    assert r.status_code == 201, r.content
    dns["hooks.example"] = ["127.0.0.1"]  # the name now points inside
    endpoint = WebhookEndpoint.objects.get()
    event_record(actor=None, action="reservations.test", target=endpoint, organization=world.org_b,
                 event="lease.confirmed", payload={"id": "x"})
    assert notifications_deliver() == 0
    row = Notification.objects.get(channel="webhook")
    assert row.status == "failed" and "resolves to 127.0.0.1, which is loopback" in row.last_error
    assert no_connect == []


class _Receiver(BaseHTTPRequestHandler):
    hosts: list = []

    def do_POST(self):  # noqa: N802 - http.server API
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).hosts.append(self.headers["Host"])
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_allow_listed_receiver_gets_the_post_at_the_checked_address(world, dns, settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Receiver.hosts = []
    try:
        dns["hooks.example"] = ["127.0.0.1"]
        url = f"http://hooks.example:{server.server_port}/hook"
        assert _register(world, url).status_code == 201
        event_record(actor=None, action="reservations.test", target=WebhookEndpoint.objects.get(),
                     organization=world.org_b, event="lease.confirmed", payload={"id": "x"})
        assert notifications_deliver() == 1
    finally:
        server.shutdown()
    # connected to the address checked, the name kept in the Host header
    assert _Receiver.hosts == [f"hooks.example:{server.server_port}"]
    assert Notification.objects.get(channel="webhook").status == "delivered"

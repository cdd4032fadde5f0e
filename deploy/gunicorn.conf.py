"""gunicorn settings shared by `make run`, the container image and the e2e stack (`gunicorn --config` this file).

gunicorn answers a request it cannot parse itself, before Django sees it, with an HTML page (no setting makes it
answer problem+json). So the limits are set so that every URL and header this API defines reaches Django, which
answers a bad query with a 400 problem+json (docs/architecture.md, "Request size limits"):

- `limit_request_line`: 8190 bytes for `METHOD URI HTTP/1.1` (gunicorn's largest finite value; its default 4094
  sent a URL of 4 KiB to its HTML 414). A longer request line is still gunicorn's 414 text/html.
- `limit_request_field_size`: 16384 bytes per header line (default 8190); a longer one is gunicorn's 431 HTML.

With `PROMETHEUS_MULTIPROC_DIR` set, the worker processes keep their metric values in files there (apps/core/
metrics.py): the directory is emptied when gunicorn starts (values of a previous run would be added in), and a
worker that exits is marked dead.
"""
import os
from pathlib import Path

limit_request_line = 8190
limit_request_field_size = 16384


def on_starting(server):
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        Path(directory).mkdir(parents=True, exist_ok=True)
        for f in Path(directory).glob("*.db"):
            f.unlink()


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)

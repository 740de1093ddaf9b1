"""A local HTTP server that answers the Hugging Face Hub's file API (``HF_ENDPOINT``) for
``config.json``: ``HEAD``/``GET /{org}/{name}/resolve/{revision}/config.json`` the way
huggingface.co answers them (``X-Repo-Commit``, ``ETag``, ``Content-Length``; 401 with
``X-Error-Code: GatedRepo`` for a gated repository, 404 ``RepoNotFound`` for an unknown one).

Used by ``tests/estimate/test_hub_lookup.py`` and by ``bench/online_reach.py``. It serves only
the answers it is given: nothing leaves this machine.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMIT = "0123456789abcdef0123456789abcdef01234567"
GATED = "gated"  # an answer: HTTP 401 as for a gated repository without a token


@dataclass
class Answers:
    """What the fake Hub serves: repo id -> config.json bytes, :data:`GATED`, or
    ``("slow", seconds, bytes)``; any other repository is a 404."""

    files: dict[str, object] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)  # the repositories requested, in order


def _handler(answers: Answers) -> type[BaseHTTPRequestHandler]:
    class FakeHub(BaseHTTPRequestHandler):
        def _answer(self, body: bool) -> None:
            repo = self.path.split("/resolve/")[0].strip("/")
            answers.asked.append(repo)
            payload = answers.files.get(repo)
            if isinstance(payload, tuple) and payload and payload[0] == "slow":
                time.sleep(payload[1])
                payload = payload[2]
            if payload == GATED:
                self.send_response(401)
                self.send_header("X-Error-Code", "GatedRepo")
                self.send_header("X-Error-Message", f"Access to model {repo} is restricted.")
                self.end_headers()
                return
            if not isinstance(payload, bytes):
                self.send_response(404)
                self.send_header("X-Error-Code", "RepoNotFound")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("X-Repo-Commit", COMMIT)
            self.send_header("ETag", f'"{abs(hash(payload))}"')
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if body:
                self.wfile.write(payload)

        def do_HEAD(self) -> None:  # noqa: N802
            self._answer(False)

        def do_GET(self) -> None:  # noqa: N802
            self._answer(True)

        def log_message(self, *args: object) -> None:
            pass

    return FakeHub


class FakeHubServer:
    """``with FakeHubServer(answers) as endpoint:`` serves on 127.0.0.1 (a free port) in a thread."""

    def __init__(self, answers: Answers) -> None:
        self.answers = answers
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(answers))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> str:
        self._thread.start()
        return self.endpoint

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

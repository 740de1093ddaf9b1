"""An uncatalogued Hub id's ``config.json``, downloaded with ``huggingface_hub`` when online.

Only ``config.json`` is fetched, into the standard Hugging Face cache (so later runs find it
offline), with ``HF_TOKEN`` for gated repositories and short timeouts. The file is read as
data: ``auto_map``/``trust_remote_code`` are never acted on. Nothing is fetched when
``HF_HUB_OFFLINE`` is set, when the caller says offline (``--offline``, ``offline = true``), or
when ``huggingface_hub`` is not installed (the ``memlint[hub]`` extra); :func:`why_offline`
says which. A failure is remembered for the process, so a name is asked for once.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from memlint.catalog.config_file import UnknownModel, read_config

ETAG_TIMEOUT_S = 3.0  # the metadata request (HEAD)
DOWNLOAD_TIMEOUT_S = 5  # the file itself: a few kilobytes

_failures: dict[str, str] = {}  # id -> why the Hub gave no config.json
# Why no request reaches the Hub at all (its host name does not resolve, the connection is
# refused), once one lookup found out: huggingface_hub retries a failed connection five times
# over 23 s, which a tree of configs naming twenty uncatalogued models paid twenty times.
_unreachable: str | None = None
_lock = threading.Lock()
# The language server never waits for the network: with a callback set, a lookup starts a
# download in a thread and answers "not yet"; the callback runs (in that thread) once the
# config.json is in the cache, and the server lints again.
_background: Callable[[str], None] | None = None
_pending: set[str] = set()


def in_background(on_fetched: Callable[[str], None] | None) -> None:
    """Fetch without blocking from now on, calling ``on_fetched(model_id)`` after each success."""
    global _background
    _background = on_fetched


def pending(model_id: str) -> bool:
    with _lock:
        return model_id in _pending


def env_offline() -> bool:
    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return value.strip().upper() in ("1", "ON", "YES", "TRUE")


def why_offline(offline: bool | None) -> str | None:
    """Why the Hub would not be asked now (None: it would be)."""
    if offline:
        return "offline (--offline or `offline = true`)"
    if env_offline():
        return "HF_HUB_OFFLINE is set"
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        return "huggingface_hub is not installed (pip install 'memlint[hub]')"
    return None


def last_failure(model_id: str) -> str | None:
    with _lock:
        return _failures.get(model_id)


@contextlib.contextmanager
def _download_timeout(seconds: int) -> Iterator[None]:
    from huggingface_hub import constants

    before = constants.HF_HUB_DOWNLOAD_TIMEOUT
    constants.HF_HUB_DOWNLOAD_TIMEOUT = seconds
    try:
        yield
    finally:
        constants.HF_HUB_DOWNLOAD_TIMEOUT = before


def fetch_config(model_id: str, *, offline: bool | None = None) -> dict[str, Any] | None:
    """``model_id``'s ``config.json`` as a dict, or None (``last_failure`` says why)."""
    if why_offline(offline) is not None:
        return None
    with _lock:
        if _unreachable is not None:
            _failures.setdefault(model_id, _unreachable)
            return None
        if model_id in _failures or model_id in _pending:
            return None
        callback = _background
        if callback is not None:
            _pending.add(model_id)
    if callback is not None:
        threading.Thread(target=_fetch_then, args=(model_id, callback), daemon=True,
                         name=f"memlint-hub-{model_id}").start()
        return None
    return _fetch(model_id)


def _fetch(model_id: str) -> dict[str, Any] | None:
    global _unreachable
    try:
        _check_host()
        return _download(model_id)
    except _HubFailure as failure:
        with _lock:
            _failures[model_id] = str(failure)
            if failure.unreachable:
                _unreachable = str(failure)
        return None


def _check_host() -> None:
    """A host name that does not resolve fails here at once, not after the retries."""
    import socket
    from urllib.parse import urlsplit

    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    parts = urlsplit(endpoint)
    if not parts.hostname:
        return
    try:
        socket.getaddrinfo(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    except (socket.gaierror, UnicodeError):
        raise _HubFailure(f"the Hub could not be reached ({parts.hostname} does not resolve)",
                          unreachable=True) from None


def _fetch_then(model_id: str, callback: Callable[[str], None]) -> None:
    config = _fetch(model_id)
    with _lock:
        _pending.discard(model_id)
    if config is not None:
        callback(model_id)


class _HubFailure(Exception):
    def __init__(self, message: str, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable  # no request can reach the Hub: no other id is asked either


def _download(model_id: str) -> dict[str, Any]:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        HFValidationError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
    )

    try:
        with _download_timeout(DOWNLOAD_TIMEOUT_S):
            path = hf_hub_download(
                model_id, "config.json", etag_timeout=ETAG_TIMEOUT_S,
                endpoint=os.environ.get("HF_ENDPOINT") or None,
                library_name="memlint",
            )
    except GatedRepoError:
        raise _HubFailure("a gated repository: accept its licence on the Hub and set HF_TOKEN") from None
    except RepositoryNotFoundError:
        raise _HubFailure("no such repository on the Hub (or a private one: set HF_TOKEN)") from None
    except EntryNotFoundError:
        raise _HubFailure("the repository has no config.json") from None
    except HFValidationError:
        raise _HubFailure("not a valid Hub id") from None
    except OfflineModeIsEnabled:
        raise _HubFailure("HF_HUB_OFFLINE is set") from None
    except HfHubHTTPError as error:
        status = getattr(getattr(error, "response", None), "status_code", None)
        if status:
            raise _HubFailure(f"the Hub answered HTTP {status}") from None
        raise _HubFailure("the Hub could not be reached", unreachable=True) from None
    except Exception as error:  # noqa: BLE001 - the transport's errors differ between releases
        # (httpx, httpx2); an optional download must never stop the lint
        if "timeout" in type(error).__name__.lower() or isinstance(error, TimeoutError):
            raise _HubFailure("the Hub did not answer in time") from None
        raise _HubFailure(f"the Hub could not be reached ({type(error).__name__})",
                          unreachable="connect" in type(error).__name__.lower()) from None
    try:
        return read_config(Path(path))
    except UnknownModel as error:
        raise _HubFailure(f"its config.json is unreadable: {str(error).split(': ', 1)[-1]}") from None


__all__ = ["fetch_config", "in_background", "last_failure", "pending", "why_offline", "env_offline"]

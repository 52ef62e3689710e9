"""What a failed fetch means: whether an exception says the data could not be fetched (no network, offline
mode, a transfer cut short) rather than what is in it, and what a Hub answer behind it means, in one line."""
from __future__ import annotations

import socket
from typing import Optional

# Packages of the HTTP stacks that huggingface_hub, fsspec and datasets read files with: their errors (a connection
# refused or dropped, a transfer cut short) are not all OSErrors (httpx's RemoteProtocolError is not).
_HTTP_PACKAGES = ("httpx", "httpcore", "h11", "aiohttp", "requests", "urllib3")


def is_network_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the data could not be fetched (no network, offline mode, a transfer cut short) rather
    than what is in it."""
    if isinstance(exc, (ConnectionError, TimeoutError, socket.gaierror)):  # gaierror: a host name not resolved
        return True
    status = answered_status(exc)
    if status is not None and status < 500:
        return False  # the server answered (404, 403...): the data is not there, whatever the transport
    for cls in type(exc).__mro__:
        root = cls.__module__.split(".")[0].rstrip("0123456789")  # httpx2, httpcore2: huggingface_hub's vendored copies
        if root in _HTTP_PACKAGES:
            return True
    return any(word in type(exc).__name__.lower() for word in ("offline", "connect", "timeout", "network"))


def answered_status(exc: BaseException) -> Optional[int]:
    """The HTTP status of the answer an HTTP error carries (httpx/requests ``response``, aiohttp ``status``)."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None) if response is not None else getattr(exc, "status", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def answered_in_chain(exc: BaseException) -> Optional[int]:
    """The HTTP status of the first answer behind ``exc`` or an exception it was raised from or during: a
    FileNotFoundError may stand for a 404 answer or for an unreachable host (fsspec's HTTP file system)."""
    return next((status for e in _chain(exc) if (status := answered_status(e)) is not None), None)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during, each once (a chain can loop back on itself)."""
    chain: list[BaseException] = []
    current: Optional[BaseException] = exc
    while current is not None and all(current is not e for e in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def hub_hint(exc: BaseException) -> str:
    """What the Hub's answer behind ``exc`` means, where the message does not say: huggingface_hub's file system
    words a gated repo (403) as "repository not found"."""
    if any(type(e).__name__ == "GatedRepoError" for e in _chain(exc)):
        return (" [the Hub answered 403: the repo is gated; accept its access conditions on its page, then log "
                "in with a token of that account (HF_TOKEN or `hf auth login`)]")
    return ""


def failure_text(exc: BaseException) -> str:
    """``exc`` as one line for an error message: its type, its text, and what a Hub answer behind it means."""
    text = f"{type(exc).__name__}: {exc}".rstrip(".") + hub_hint(exc)
    if isinstance(exc, FileNotFoundError) and answered_in_chain(exc) is None:
        # fsspec's HTTP file system says FileNotFoundError of a host it could not reach: the cause is behind it
        cause = next((e for e in _chain(exc)[1:] if is_network_error(e)), None)
        if cause is not None:
            text += f" [its server cannot be reached: {type(cause).__name__}: {cause}]"
    return text


def http_answer(message: str, timeout: float = 10.0) -> str:
    """What the server of the http(s) URL in datasets' "Unable to find '<url>'" answers, for that message: fsspec
    says the same of a 403, a 500 and a server that cannot be reached, which are no missing file. Empty for a
    404 (the message is right), an answer with the file, or no such URL in the message."""
    import re
    import urllib.error
    import urllib.parse
    import urllib.request

    found = re.search(r"Unable to find '(https?://[^']+)'", message)
    if found is None:
        return ""
    # escaped as fsspec sends it: urllib refuses a URL holding a space ("my rows.jsonl") with a bare InvalidURL
    url = urllib.parse.quote(found.group(1), safe="/:?#[]@!$&()*+,;=%~")
    try:
        with urllib.request.urlopen(url, timeout=timeout):  # GET: some servers refuse HEAD
            return ""
    except ValueError:  # a URL urllib cannot send: nothing to add to the message
        return ""
    except urllib.error.HTTPError as exc:
        return "" if exc.code == 404 else f" [its server answered {exc.code} {exc.reason}]"
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return f" [its server cannot be reached: {type(reason).__name__}: {reason}]"

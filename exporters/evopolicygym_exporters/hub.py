"""Pushing an exported dataset directory to a Hugging Face Hub dataset repo.

The upload replaces each pushed config's shards (shards named for an older
export are deleted, not left to double the rows) and carries the card and the
manifest; it is one commit unless the client splits a very large upload. ``HF_TOKEN``
(or a saved login) authenticates, and ``HF_ENDPOINT`` names another Hub, as everywhere
in huggingface_hub.
"""

from __future__ import annotations

import json
from pathlib import Path

from evopolicygym_exporters.pipeline import MANIFEST

__all__ = ["HubError", "push_to_hub"]


class HubError(RuntimeError):
    """The Hub refused or could not be reached; the message says which and why."""


def _transport_errors() -> tuple[type[Exception], ...]:
    """The HTTP client's connection errors (not OSError subclasses); which client
    huggingface_hub uses depends on its version."""
    found: list[type[Exception]] = []
    for module in ("httpx2", "httpx", "requests"):
        try:
            imported = __import__(module)
        except ImportError:
            continue
        error = getattr(imported, "TransportError", None) or getattr(
            imported, "ConnectionError", None
        )
        if isinstance(error, type) and issubclass(error, Exception):
            found.append(error)
    return tuple(found)


def push_to_hub(
    folder: Path,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    create_pr: bool = False,
) -> str:
    """Upload ``folder`` (an export) to dataset repo ``repo_id``; the commit's URL."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    unreachable: tuple[type[Exception], ...] = (OSError, *_transport_errors())
    manifest = json.loads((folder / MANIFEST).read_text())
    configs = sorted(manifest["configs"])
    api = HfApi()
    try:
        # None, not False: without --private a new repo follows the namespace's default.
        api.create_repo(repo_id, repo_type="dataset", private=private or None, exist_ok=True)
        if revision and not create_pr:
            api.create_branch(repo_id, repo_type="dataset", branch=revision, exist_ok=True)
        info = api.upload_folder(
            repo_id=repo_id,
            repo_type="dataset",
            folder_path=folder,
            revision=revision,
            create_pr=create_pr,
            commit_message=f"evopolicy export: {', '.join(configs)}",
            allow_patterns=["README.md", MANIFEST, *(f"{c}/*.parquet" for c in configs)],
            delete_patterns=[f"{c}/*.parquet" for c in configs],
        )
    except HfHubHTTPError as exc:
        raise HubError(
            f"the Hub refused the push to {repo_id}: {' '.join(str(exc).split())}"
        ) from exc
    except unreachable as exc:  # connection refused, DNS, TLS
        raise HubError(f"cannot reach the Hub to push {repo_id}: {exc}") from exc
    except ValueError as exc:  # the client refusing the arguments or the card's metadata
        raise HubError(f"cannot push to {repo_id}: {' '.join(str(exc).split())}") from exc
    return str(getattr(info, "pr_url", None) or getattr(info, "commit_url", info))

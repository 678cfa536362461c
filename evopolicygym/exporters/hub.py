"""Pushing an exported dataset directory to a Hugging Face Hub dataset repo.

The upload replaces each pushed config's shards in one commit (shards named
for an older export are deleted, not left to double the rows) and carries the
card and the manifest. ``HF_TOKEN`` (or a saved login) authenticates, and
``HF_ENDPOINT`` names another Hub, as everywhere in huggingface_hub.
"""

from __future__ import annotations

import json
from pathlib import Path

from evopolicygym.exporters.pipeline import MANIFEST

__all__ = ["HubError", "push_to_hub"]


class HubError(RuntimeError):
    """The Hub refused or could not be reached; the message says which and why."""


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

    manifest = json.loads((folder / MANIFEST).read_text())
    configs = sorted(manifest["configs"])
    api = HfApi()
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
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
        raise HubError(f"the Hub refused the push to {repo_id}: {' '.join(str(exc).split())}") from exc
    except OSError as exc:  # connection refused, DNS, TLS
        raise HubError(f"cannot reach the Hub to push {repo_id}: {exc}") from exc
    return str(getattr(info, "pr_url", None) or getattr(info, "commit_url", info))

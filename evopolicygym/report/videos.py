"""The Episode videos a Run's Submissions published (``video-*`` bulk artifacts), shown in
its report as players with the bytes inline, so the page stays one self-contained file.

Only a few Submissions are shown, within a byte bound: the best published one and the
latest, then others from the latest back. A video whose blob retention has pruned (or that
fails its digest check) is named as missing, never fatal to the page.
"""

from __future__ import annotations

import base64

from evopolicygym.records.blobcodec import BlobError
from evopolicygym.records.events import ArtifactRef
from evopolicygym.records.location import Store
from evopolicygym.report.html import esc

__all__ = ["VIDEO_BYTES", "VIDEO_SUBMISSIONS", "is_video", "videos_markup"]

VIDEO_SUBMISSIONS = 4  # Submissions whose videos a page embeds
VIDEO_BYTES = 12_000_000  # bytes of video a page embeds at most


def is_video(artifact: ArtifactRef) -> bool:
    return artifact.name.startswith("video-") and artifact.media_type in (
        "video/mp4",
        "image/webp",
    )


def _order(videos: dict[int, list[ArtifactRef]], best: int | None) -> list[int]:
    latest_first = sorted(videos, reverse=True)
    first = [s for s in (best, latest_first[0] if latest_first else None) if s in videos]
    rest = [s for s in latest_first if s not in first]
    return list(dict.fromkeys(first + rest))[:VIDEO_SUBMISSIONS]


def _player(artifact: ArtifactRef, data: bytes) -> str:
    source = f"data:{artifact.media_type};base64,{base64.b64encode(data).decode('ascii')}"
    caption = f"<figcaption>{esc(artifact.name)}</figcaption>"
    if artifact.media_type == "video/mp4":
        return f'<figure><video controls loop muted src="{source}"></video>{caption}</figure>'
    return f'<figure><img alt="{esc(artifact.name)}" src="{source}">{caption}</figure>'


def videos_markup(videos: dict[int, list[ArtifactRef]], best: int | None, store: Store) -> str:
    """The videos of a few Submissions (see the module), each labelled, as page markup."""
    if not videos:
        return '<p class="muted">No Submission published a video.</p>'
    parts: list[str] = []
    spent = 0
    for submission in _order(videos, best):
        label = " (best published)" if submission == best else ""
        parts.append(f'<h3>Submission {submission}{esc(label)}</h3><div class="videos">')
        for artifact in videos[submission]:
            if spent + artifact.size > VIDEO_BYTES:
                parts.append(f'<p class="muted">{esc(artifact.name)}: over the page\'s bound</p>')
                continue
            try:
                data = store.blobs.get(artifact.blob)
            except BlobError:
                parts.append(f'<p class="muted">{esc(artifact.name)}: not kept (retention)</p>')
                continue
            spent += len(data)
            parts.append(_player(artifact, data))
        parts.append("</div>")
    shown = min(len(videos), VIDEO_SUBMISSIONS)
    parts.append(
        f'<p class="note">{shown} of {len(videos)} Submissions with videos shown; every video '
        "is a bulk artifact of its Submission in the record.</p>"
    )
    return "".join(parts)

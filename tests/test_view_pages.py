"""The viewer's pages of one Run: a Submission (facts, program, diff, Feedback, Episodes,
artifacts), an artifact's bytes, the Agent's conversation (paged, the CLI's own record
standing in for an attempt's live chunks) and the event log (paged). Every recorded text
reaches a page escaped, and no Host-private value reaches one."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.viewer import require_view

require_view()

from evopolicygym.program import Program  # noqa: E402
from evopolicygym.records.events import (  # noqa: E402
    AgentExited,
    AgentMessages,
    AgentStarted,
    ArtifactRef,
    EpisodeCompleted,
    EvaluationStarted,
    Event,
    PoolEntry,
    RunCreated,
    SubmissionPublished,
    new_event,
)
from evopolicygym.records.location import open_store  # noqa: E402
from evopolicygym.records.pools import put_pool  # noqa: E402
from evopolicygym.report.run_data import lineage_of  # noqa: E402
from evopolicygym.transcript import AgentIdentity, Message, ToolCall, Usage  # noqa: E402
from tests.support.runlogs import CANARY, CANARY_SEEDS, synth_run, write_run  # noqa: E402
from tests.support.viewer import view_client  # noqa: E402

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
HOSTILE_FILE = f"{IMG}.py"
VIDEO = b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 4
PNG = b"\x89PNG\r\n\x1a\n" + b"frame" * 10
NOTE = f"a note {SCRIPT}\n".encode()
NOTE_NAME = f"{IMG}.html"
LIVE_MESSAGES = 120  # attempt 1: a system prompt and 119 more, most a chunk of their own


def _pool() -> list[PoolEntry]:
    base = CANARY_SEEDS["pool"] * 10
    return [
        PoolEntry(
            index=i,
            split="train",
            seed=base + i,
            policy_seed=base + 100 + i,
            scenario={"note": f"{CANARY}-pool-{i}"},
        )
        for i in range(4)
    ]


def _attempt_one() -> list[Event]:
    """Attempt 1's live chunks: message n (1-based) says ``[message n]``; one of them
    carries hostile text in every field a message has."""
    events: list[Event] = [AgentStarted(attempt=1, command=["chat"], tools=None)]
    messages = [Message(role="system", content="[message 1] the task")]
    for n in range(2, LIVE_MESSAGES + 1):
        if n == 7:
            messages.append(
                Message(
                    role="assistant",
                    content=f"[message {n}] {SCRIPT}",
                    reasoning=f"thinking {IMG}",
                    tool_calls=[ToolCall(id="call-7", name="bash", arguments={"cmd": SCRIPT})],
                    usage=Usage(input_tokens=1000, output_tokens=50, cached_tokens=400),
                    model=IMG,
                )
            )
        else:
            messages.append(Message(role="user", content=f"[message {n}]"))
    # The first 110 one message a chunk (so the Run has over 100 events), the rest in one.
    for chunk, at in enumerate(range(0, 110)):
        events.append(AgentMessages(attempt=1, chunk=chunk, messages=[messages[at]]))
    events.append(AgentMessages(attempt=1, chunk=110, messages=messages[110:]))
    return events


def _attempt_two() -> list[Event]:
    """Attempt 2: live chunks, then the CLI's own record, which stands in for them behind
    the live system prompt."""
    return [
        AgentStarted(attempt=2, command=["codex"]),
        AgentMessages(
            attempt=2,
            chunk=0,
            messages=[
                Message(role="system", content="[live system prompt]"),
                Message(role="user", content="[live user words]"),
            ],
        ),
        AgentMessages(
            attempt=2, chunk=1, messages=[Message(role="assistant", content="[live assistant]")]
        ),
        AgentMessages(
            attempt=2,
            chunk=2,
            source="codex-rollout",
            messages=[
                Message(role="user", content="[cli user]"),
                Message(
                    role="assistant",
                    content="[cli assistant]",
                    usage=Usage(input_tokens=7, output_tokens=3),
                ),
            ],
        ),
        AgentExited(attempt=2, exit_code=0),
    ]


def _submissions(store: Any) -> list[Event]:
    """Submission 1: a hostile program with artifacts (a video, a frame, a hostile note);
    Submission 2: an edit of it."""
    first = Program.from_files({HOSTILE_FILE: f"print('{SCRIPT}')\n", "policy.py": "x = 1\n"})
    second = Program.from_files({HOSTILE_FILE: f"print('{IMG}')\n", "policy.py": "x = 1\n"})
    for program in (first, second):
        store.blobs.put_program(program)
    seed = CANARY_SEEDS["pool"] * 10 + 1
    artifacts = [
        ArtifactRef(
            name=name, media_type=media, retention=keep, blob=store.blobs.put(data), size=len(data)
        )
        for name, media, keep, data in [
            ("video-episode-000.mp4", "video/mp4", "bulk", VIDEO),
            ("frame.png", "image/png", "permanent", PNG),
            (NOTE_NAME, "text/html", "permanent", NOTE),
        ]
    ]
    return [
        EvaluationStarted(
            submission_id=1,
            program_digest=first.digest,
            indices=[0, 1],
            budget_reserved=2,
            budget_used=2,
        ),
        EpisodeCompleted(submission_id=1, index=0, status="ok", total_reward=3.5, steps=9),
        EpisodeCompleted(
            submission_id=1,
            index=1,
            status="error",
            total_reward=0.0,
            steps=2,
            failure=f"crashed on seed {seed} ({CANARY}-pool-1) {SCRIPT}",
        ),
        SubmissionPublished(
            submission_id=1,
            program_digest=first.digest,
            score=1.75,
            failures=1,
            content={"hint": SCRIPT, "mean_steps": 5.5},
            artifacts=artifacts,
            budget_used=2,
            budget_left=6,
        ),
        EvaluationStarted(
            submission_id=2,
            program_digest=second.digest,
            indices=[0],
            budget_reserved=1,
            budget_used=3,
            parent_submission_id=1,
        ),
        EpisodeCompleted(submission_id=2, index=0, status="ok", total_reward=4.0, steps=9),
        SubmissionPublished(
            submission_id=2,
            program_digest=second.digest,
            score=4.0,
            failures=0,
            budget_used=3,
            budget_left=5,
        ),
    ]


def _write_hostile(store: Any) -> None:
    initial = Program.from_files({"policy.py": "x = 0\n"})
    store.blobs.put_program(initial)
    created = RunCreated(
        run_id="hostile",
        config={"episode_budget": 8, "seed": CANARY_SEEDS["pool"] - 1},
        benchmark_id="toy-counter",
        benchmark_spec={"id": "toy-counter", "score_direction": "maximize"},
        environment_digest="sha256:" + "e" * 64,
        initial_program_digest=initial.digest,
        agent=AgentIdentity(name="codex", provider="codex"),
        pool_blob=put_pool(store.blobs, _pool()),
        seeds=dict(CANARY_SEEDS),
    )
    events = [created, *_attempt_one(), *_submissions(store), *_attempt_two()]
    batch = [new_event(e, f"run-hostile/{i}") for i, e in enumerate(events, start=1)]
    store.events.append("run-hostile", batch, 0)


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("view-pages") / "store"
    with open_store(root, create=True) as store:
        write_run(store, synth_run("alpha"))
        _write_hostile(store)
    return root


@pytest.fixture(scope="module")
def client(store_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with view_client(store_dir, tmp_path_factory.mktemp("view-cache")) as c:
        yield c
        c.store.close()


def _page(client: Any, url: str, status: int = 200) -> str:
    response = client.get(url, headers={"accept": "text/html"})
    assert response.status_code == status, (url, response.text[:500])
    text: str = response.text
    return text


def _main(page: str) -> str:
    """The page's own part (the header names the store)."""
    return page[page.index("<main>") :]


def _text(page: str) -> str:
    """The page's text, tags dropped and entities read (what a person sees)."""
    return html.unescape(re.sub(r"<[^>]+>", "", _main(page)))


# --------------------------------------------------------------------------- a Submission


def test_a_submission_page_shows_its_program_diff_feedback_and_episodes(
    client: Any, store_dir: Path
) -> None:
    with open_store(store_dir, reader=True) as store:
        line = lineage_of(store, "alpha")[5]
    assert line.parent_submission_id == 1 and line.edit_kind
    page = _page(client, "/runs/alpha/submissions/5")
    text = _text(page)
    assert "def helper(x):" in text  # the program's file
    assert '<span class="add">+def helper(x):</span>' in page  # a diff line, marked added
    assert "--- 1/policy.py" in text and "+++ 5/policy.py" in text
    assert line.edit_kind in text
    assert "#1" in text and "(stated)" in text  # the parent the Agent named
    assert '"mean_steps": 3' in text and '"budget_left": 20' in text  # Feedback as JSON
    assert '"submission_id": 5' in text
    assert 'href="/runs/alpha/submissions/4"' in page  # previous
    assert 'href="/runs/alpha/submissions/6"' in page  # next
    assert 'href="/runs/alpha"' in page
    page = _page(client, "/runs/alpha/submissions/2")
    rows = re.findall(r"<tr>\s*<td class=\"num\">(\d+)</td>\s*<td>(\w+)</td>", page)
    assert rows == [("0", "ok"), ("1", "ok"), ("2", "ok")]  # the Episodes by pool index
    assert "-    gain = 0.5" in _text(page) and "+    gain = 0.7" in _text(page)


def test_a_failed_submission_shows_its_error_scrubbed(client: Any) -> None:
    text = _text(_page(client, "/runs/alpha/submissions/4"))
    assert "worker lost on seed <private> (<private>)" in text
    assert '"status": "failed"' in text and '"score": null' in text


def test_a_submission_unknown_or_of_an_unknown_run_is_not_found(client: Any) -> None:
    _page(client, "/runs/alpha/submissions/99", 404)
    _page(client, "/runs/nosuch/submissions/1", 404)
    assert "Submission 2" in _text(_page(client, "/runs/alp/submissions/2"))  # a prefix


def test_videos_and_artifacts_are_linked_by_name(client: Any) -> None:
    page = _page(client, "/runs/hostile/submissions/1")
    base = "/runs/hostile/submissions/1/artifacts/"
    assert f'<video controls preload="metadata" src="{base}video-episode-000.mp4">' in page
    assert f'<img alt="frame.png" src="{base}frame.png">' in page
    assert f'href="{base}%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E.html"' in page


# --------------------------------------------------------------------------- artifacts


def test_an_artifact_is_served_with_its_exact_bytes_and_type(client: Any) -> None:
    base = "/runs/hostile/submissions/1/artifacts/"
    video = client.get(base + "video-episode-000.mp4")
    assert video.status_code == 200 and video.content == VIDEO
    assert video.headers["content-type"] == "video/mp4"
    assert video.headers["accept-ranges"] == "bytes"
    png = client.get(base + "frame.png")
    assert png.content == PNG and png.headers["content-type"] == "image/png"
    note = client.get(base + "%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E.html")
    assert note.status_code == 200 and note.content == NOTE
    assert note.headers["content-type"] == "text/plain; charset=utf-8"
    assert note.headers["content-disposition"].startswith("attachment;")
    assert note.headers["x-content-type-options"] == "nosniff"


def test_a_range_of_a_video_is_answered_with_206(client: Any) -> None:
    url = "/runs/hostile/submissions/1/artifacts/video-episode-000.mp4"
    part = client.get(url, headers={"range": "bytes=4-11"})
    assert part.status_code == 206 and part.content == VIDEO[4:12]
    assert part.headers["content-range"] == f"bytes 4-11/{len(VIDEO)}"
    tail = client.get(url, headers={"range": "bytes=-5"})
    assert tail.status_code == 206 and tail.content == VIDEO[-5:]
    rest = client.get(url, headers={"range": "bytes=1000-"})
    assert rest.status_code == 206 and rest.content == VIDEO[1000:]
    past = client.get(url, headers={"range": f"bytes={len(VIDEO)}-"})
    assert past.status_code == 416 and past.headers["content-range"] == f"bytes */{len(VIDEO)}"
    several = client.get(url, headers={"range": "bytes=0-1,4-5"})
    assert several.status_code == 200 and several.content == VIDEO


def test_an_artifact_not_listed_by_the_submission_is_not_found(client: Any) -> None:
    base = "/runs/hostile/submissions/"
    assert client.get(base + "1/artifacts/other.mp4").status_code == 404
    assert client.get(base + "2/artifacts/frame.png").status_code == 404  # another one's
    assert client.get(base + "9/artifacts/frame.png").status_code == 404
    digest = "sha256:" + "0" * 64
    assert client.get(base + f"1/artifacts/{digest}").status_code == 404


# --------------------------------------------------------------------------- hostile text


@pytest.mark.parametrize(
    "url",
    [
        "/runs/hostile/submissions/1",
        "/runs/hostile/submissions/2",
        "/runs/hostile/conversation?attempt=1",
        "/runs/hostile/events",
        "/runs/hostile/events?after=100",
    ],
)
def test_hostile_text_appears_escaped_only(client: Any, url: str) -> None:
    page = _page(client, url)
    assert SCRIPT not in page and IMG not in page
    escaped = [html.escape(SCRIPT, quote=False), html.escape(IMG, quote=False)]
    assert any(e in page for e in escaped)


def test_the_submission_shows_hostile_names_and_program_text_as_text(client: Any) -> None:
    page = _page(client, "/runs/hostile/submissions/2")
    text = _text(page)
    assert HOSTILE_FILE in text  # the file name
    assert f"print('{IMG}')" in text  # its text
    assert f"-print('{SCRIPT}')" in text and f"+print('{IMG}')" in text  # the diff
    first = _text(_page(client, "/runs/hostile/submissions/1"))
    assert f'"hint": "{SCRIPT}"' in first  # Feedback content
    assert f"crashed on seed <private> (<private>) {SCRIPT}" in first  # an Episode's failure


# --------------------------------------------------------------------------- the conversation


def test_the_conversation_is_paged_fifty_messages_a_page(client: Any) -> None:
    first = _text(_page(client, "/runs/hostile/conversation"))
    assert "[message 1] the task" in first and "[message 50]" in first
    assert "[message 51]" not in first
    assert "page 1 of 3" in first and f"Attempt 1: {LIVE_MESSAGES} messages" in first
    second = _text(_page(client, "/runs/hostile/conversation?attempt=1&page=2"))
    assert "[message 51]" in second and "[message 100]" in second
    assert "[message 50]" not in second and "[message 101]" not in second
    third = _text(_page(client, "/runs/hostile/conversation?attempt=1&page=3"))
    assert "[message 120]" in third and "[message 101]" in third
    assert "#51" in second  # each message numbered in its attempt
    assert "No messages on this page" in _text(
        _page(client, "/runs/hostile/conversation?attempt=1&page=9")
    )


def test_a_message_shows_reasoning_tool_calls_and_usage(client: Any) -> None:
    text = _text(_page(client, "/runs/hostile/conversation?attempt=1"))
    assert f"thinking {IMG}" in text  # reasoning, in a details
    assert "bash" in text and f'"cmd": "{SCRIPT}"' in text  # a call's arguments as JSON
    assert "1,000 in (400 cached), 50 out (0 reasoning)" in text
    assert "1,000 input tokens (400 cached), 50 output tokens" in text  # the attempt's totals


def test_the_clis_record_stands_in_for_the_live_chunks(client: Any) -> None:
    page = _page(client, "/runs/hostile/conversation?attempt=2")
    text = _text(page)
    assert "[live system prompt]" in text  # kept ahead of the CLI's record
    assert "[cli user]" in text and "[cli assistant]" in text
    assert "[live user words]" not in text and "[live assistant]" not in text
    assert "Attempt 2: 3 messages" in text and "codex-rollout" in text
    assert text.index("[live system prompt]") < text.index("[cli user]")
    assert 'href="/runs/hostile/conversation?attempt=1"' in page  # the other attempt


def test_the_conversation_of_a_run_lists_its_tools_and_is_live(client: Any) -> None:
    page = _page(client, "/runs/alpha/conversation")
    assert 'data-live="conv-messages"' in page and 'data-live-run="alpha"' in page
    assert "Tools offered:" in page and "<code>bash</code>" in page
    _page(client, "/runs/alpha/conversation?attempt=7", 404)
    _page(client, "/runs/alpha/conversation?page=zero", 400)


# --------------------------------------------------------------------------- the event log


def test_the_event_log_is_paged_a_hundred_events_a_page(client: Any) -> None:
    page = _page(client, "/runs/hostile/events")
    versions = [int(v) for v in re.findall(r'<tr id="v(\d+)">', page)]
    assert versions == list(range(1, 101))
    assert 'href="?after=100"' in page and 'data-live="ev-table"' in page
    rest = _page(client, "/runs/hostile/events?after=100")
    versions = [int(v) for v in re.findall(r'<tr id="v(\d+)">', rest)]
    total = next(s.version for s in client.store.events.streams("run-hostile"))
    assert versions == list(range(101, total + 1))
    assert 'href="?after=0"' in rest
    text = _text(rest)
    assert "SubmissionPublished" in text and "EvaluationStarted" in text
    assert '"score": 1.75' in text  # a payload, as JSON


def test_the_event_log_leaves_private_fields_out(client: Any) -> None:
    text = _text(_page(client, "/runs/alpha/events"))
    assert '"benchmark_id": "toy-counter"' in text
    assert '"pool_blob"' not in text and '"seeds"' not in text and '"seed"' not in text
    assert "ValidationStarted" in text and "AssessmentCompleted" in text


# --------------------------------------------------------------------------- private values


PAGES = [
    "/runs/{run}/submissions/{sid}",
    "/runs/{run}/conversation",
    "/runs/{run}/conversation?attempt={attempt}",
    "/runs/{run}/events",
    "/runs/{run}/events?after=100",
]


@pytest.mark.parametrize("run", ["alpha", "hostile"])
def test_no_private_value_reaches_any_page(client: Any, run: str) -> None:
    sids = range(1, 7) if run == "alpha" else range(1, 3)
    urls = [
        u.format(run=run, sid=sid, attempt=attempt)
        for u in PAGES
        for sid in sids
        for attempt in (1, 2)
    ]
    secrets = [CANARY, *(str(s) for s in CANARY_SEEDS.values())]
    secrets += [str(CANARY_SEEDS["pool"] * 10 + i) for i in range(8)]
    secrets += [str(CANARY_SEEDS["pool"] - 1)]
    for url in dict.fromkeys(urls):
        page = client.get(url).text
        for secret in secrets:
            assert secret not in page, (url, secret)


def test_the_conversation_follows_a_run_that_grows(tmp_path: Path) -> None:
    """A page read again after more is recorded shows it: the index reads on from where it
    left off, and a CLI record that comes later stands in for the chunks read before."""
    root = tmp_path / "store"
    with open_store(root, create=True) as store:
        initial = Program.from_files({"policy.py": "x = 0\n"})
        store.blobs.put_program(initial)
        created = RunCreated(
            run_id="grows",
            config={"episode_budget": 4},
            benchmark_id="toy-counter",
            benchmark_spec={},
            environment_digest="sha256:" + "e" * 64,
            initial_program_digest=initial.digest,
            agent=AgentIdentity(name="codex", provider="codex"),
        )
        said = [Message(role="system", content="[prompt]"), Message(role="user", content="[u1]")]
        events = [
            created,
            AgentStarted(attempt=1),
            AgentMessages(attempt=1, chunk=0, messages=said),
        ]
        store.events.append("run-grows", [new_event(e, f"g/{i}") for i, e in enumerate(events)], 0)
    with view_client(root, tmp_path / "cache") as client:
        text = _text(_page(client, "/runs/grows/conversation"))
        assert "Attempt 1: 2 messages" in text and "[u1]" in text
        with open_store(root) as store:
            more = [
                AgentMessages(
                    attempt=1,
                    chunk=1,
                    messages=[Message(role="assistant", content=f"[a{n}]") for n in range(60)],
                )
            ]
            store.events.append("run-grows", [new_event(more[0], "g/more")], 3)
        text = _text(_page(client, "/runs/grows/conversation?page=2"))
        assert "Attempt 1: 62 messages" in text and "[a48]" in text and "[a59]" in text
        assert "[a47]" not in text  # message 50 is a47: page 1's last
        with open_store(root) as store:
            record = AgentMessages(
                attempt=1,
                chunk=2,
                source="claude-session",
                messages=[Message(role="user", content="[r]")],
            )
            store.events.append("run-grows", [new_event(record, "g/record")], 4)
        text = _text(_page(client, "/runs/grows/conversation"))
        assert "Attempt 1: 2 messages" in text
        assert "[prompt]" in text and "[r]" in text and "[u1]" not in text
        client.store.close()

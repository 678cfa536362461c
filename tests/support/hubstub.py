"""A small Hugging Face Hub on loopback, in memory, for testing real uploads.

It speaks the part of the Hub's HTTP API that ``huggingface_hub`` (2.x) uses to
create a repo and a branch, list a tree, upload a folder (preupload, NDJSON
commit, optionally the git-LFS batch / upload / verify steps), open a pull
request and read repo info, with the Hub's JSON shapes and error conventions
(``{"error": ...}`` bodies, ``X-Error-Code`` / ``X-Error-Message`` headers).

Every repo keeps its commits and refs (branches and ``refs/pr/N``) as file
snapshots, so a test can read exactly what a client left at any revision.
Every request but the presigned LFS upload must carry ``Authorization: Bearer
<token>``. Two simplifications, stated here so no test relies on more: a new
repo starts with an empty initial commit (the Hub adds a ``.gitattributes``),
and a file is LFS only when its name ends in one of ``lfs_suffixes`` (empty by
default: every file is "regular", which keeps a client with ``hf_xet`` off the
Xet storage protocol this stub does not speak). As on the Hub, a repo created
without a visibility takes its namespace's default (``private_by_default``).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

__all__ = ["Blob", "Commit", "HubStub", "PullRequest", "Repo", "git_blob_oid"]

INVALID_CREDENTIALS = "Invalid credentials in Authorization header"
_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}  # web URL prefix per repo type
_NAME = re.compile(r"[A-Za-z0-9][\w.-]{0,95}")


def git_blob_oid(data: bytes) -> str:
    """Git's object id of a blob: what the Hub reports as a regular file's ``oid``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _lfs_pointer(data: bytes) -> bytes:
    return (
        "version https://git-lfs.github.com/spec/v1\n"
        f"oid sha256:{hashlib.sha256(data).hexdigest()}\nsize {len(data)}\n"
    ).encode()


@dataclass(frozen=True)
class Blob:
    data: bytes = field(repr=False)
    lfs: bool = False

    @property
    def oid(self) -> str:
        """The git blob id: of the pointer file for an LFS file, as in git."""
        return git_blob_oid(_lfs_pointer(self.data) if self.lfs else self.data)


@dataclass
class Commit:
    oid: str
    parent: str | None
    title: str
    description: str
    files: dict[str, Blob] = field(repr=False)


@dataclass
class PullRequest:
    num: int
    title: str
    description: str
    base: str
    created_at: str


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    refs: dict[str, str] = field(default_factory=dict)  # "main", "dev", "refs/pr/1" -> commit oid
    commits: dict[str, Commit] = field(default_factory=dict, repr=False)
    pulls: dict[int, PullRequest] = field(default_factory=dict)

    def files(self, revision: str = "main") -> dict[str, bytes]:
        """Path -> content at ``revision`` (a ref or a commit id)."""
        oid = self.refs.get(revision, revision)
        return {path: blob.data for path, blob in self.commits[oid].files.items()}

    def history(self, revision: str = "main") -> list[Commit]:
        """The commits reachable from ``revision``, newest first."""
        out: list[Commit] = []
        oid: str | None = self.refs.get(revision, revision)
        while oid is not None:
            out.append(self.commits[oid])
            oid = self.commits[oid].parent
        return out


class HubError(Exception):
    """Answered as the Hub answers errors."""

    def __init__(self, status: int, message: str, code: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.extra = status, message, code, extra


@dataclass
class Request:
    method: str
    path: str  # as sent, without the leading "/" and the query
    query: dict[str, str]
    headers: Any
    body: bytes

    def json(self) -> Any:
        try:
            return json.loads(self.body or b"null")
        except ValueError as exc:
            raise HubError(400, f"invalid JSON body: {exc}") from None


@dataclass
class Response:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request, dict[str, str]], Response]


class HubStub:
    """The Hub at ``endpoint`` while started (``with HubStub(token) as hub: ...``)."""

    def __init__(
        self,
        token: str,
        *,
        lfs_suffixes: tuple[str, ...] = (),
        tree_page_size: int = 1000,
        user: str = "stub-user",
        private_by_default: tuple[str, ...] = (),
    ) -> None:
        self.token = token
        # Namespaces whose new repos are private unless the request says otherwise.
        self.private_by_default = private_by_default
        self.lfs_suffixes = lfs_suffixes
        self.tree_page_size = tree_page_size
        self.user = user
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[str] = []  # "METHOD route" of every request, in order
        self.created: list[dict[str, Any]] = []  # the payload of every repo creation asked for
        self.unexpected: list[str] = []  # requests no route matched
        self.failures: list[str] = []  # the stub's own errors: a test should see none
        self._uploaded: dict[str, bytes] = {}  # LFS objects PUT to "storage", by sha256
        self._verified: set[str] = set()  # ... and verified with the Hub
        self._secret = secrets.token_bytes(16)
        self._lock = threading.RLock()
        self._counter = 0
        self._routes: list[tuple[str, re.Pattern[str], str, Handler]] = []
        repo = r"(?P<type>models|datasets|spaces)/(?P<repo>[\w.-]+/[\w.-]+)"
        git = r"(?P<prefix>datasets/|spaces/)?(?P<repo>[\w.-]+/[\w.-]+)\.git"
        for route, pattern, handler in [
            ("POST /api/repos/create", r"api/repos/create", self._create_repo),
            ("POST /api/validate-yaml", r"api/validate-yaml", self._validate_yaml),
            ("GET /api/{type}s/{repo}", rf"api/{repo}", self._repo_info),
            (
                "GET /api/{type}s/{repo}/revision/{rev}",
                rf"api/{repo}/revision/(?P<rev>[^/]+)",
                self._repo_info,
            ),
            (
                "POST /api/{type}s/{repo}/branch/{branch}",
                rf"api/{repo}/branch/(?P<branch>[^/]+)",
                self._create_branch,
            ),
            (
                "GET /api/{type}s/{repo}/tree/{rev}[/{path}]",
                rf"api/{repo}/tree/(?P<rev>[^/]+)(?:/(?P<path>[^/]+))?",
                self._tree,
            ),
            (
                "POST /api/{type}s/{repo}/preupload/{rev}",
                rf"api/{repo}/preupload/(?P<rev>[^/]+)",
                self._preupload,
            ),
            (
                "POST /api/{type}s/{repo}/commit/{rev}",
                rf"api/{repo}/commit/(?P<rev>[^/]+)",
                self._commit,
            ),
            (
                "POST /api/{type}s/{repo}/discussions",
                rf"api/{repo}/discussions",
                self._create_discussion,
            ),
            (
                "GET /api/{type}s/{repo}/discussions/{num}",
                rf"api/{repo}/discussions/(?P<num>\d+)",
                self._discussion,
            ),
            (
                "POST /{type}s/{repo}.git/info/lfs/objects/batch",
                rf"{git}/info/lfs/objects/batch",
                self._lfs_batch,
            ),
            (
                "POST /{type}s/{repo}.git/info/lfs/objects/verify",
                rf"{git}/info/lfs/objects/verify",
                self._lfs_verify,
            ),
            ("PUT (presigned storage URL)", r"_storage/(?P<oid>[0-9a-f]{64})", self._storage_put),
        ]:
            self._routes.append((route.split()[0], re.compile(pattern), route, handler))
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> HubStub:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="hub-stub", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> HubStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ for tests

    def repo(self, repo_id: str, repo_type: str = "dataset") -> Repo:
        with self._lock:
            return self.repos[(repo_type, repo_id)]

    def files(
        self, repo_id: str, revision: str = "main", repo_type: str = "dataset"
    ) -> dict[str, bytes]:
        with self._lock:
            return self.repo(repo_id, repo_type).files(revision)

    def commit_files(
        self,
        repo_id: str,
        files: dict[str, bytes],
        *,
        message: str = "seed",
        revision: str = "main",
        repo_type: str = "dataset",
    ) -> str:
        """Commit ``files`` as someone else would (creating the repo, public, if missing)."""
        with self._lock:
            repo = self.repos.get((repo_type, repo_id))
            if repo is None:
                repo = self.repos[(repo_type, repo_id)] = Repo(repo_type, repo_id, private=False)
                repo.refs["main"] = self._new_commit(repo, None, "initial commit", "", {})
            head = repo.refs[revision]
            tree = repo.commits[head].files | {
                p: Blob(d, self._is_lfs(p) and bool(d)) for p, d in files.items()
            }
            repo.refs[revision] = self._new_commit(repo, head, message, "", tree)
            return repo.refs[revision]

    def routes_used(self) -> list[str]:
        """Each route requested, once, in the order first seen."""
        with self._lock:
            return list(dict.fromkeys(self.requests))

    # ------------------------------------------------------------------ dispatch

    def handle(self, request: Request) -> Response:
        with self._lock:
            for method, pattern, route, handler in self._routes:
                # Matched on the path as sent: a quoted revision or tree path keeps its "%2F".
                match = pattern.fullmatch(request.path)
                if match is None or method != request.method:
                    continue
                self.requests.append(route)
                groups = {k: unquote(v) for k, v in match.groupdict().items() if v is not None}
                try:
                    if handler != self._storage_put:  # a presigned URL carries its own signature
                        self._authorize(request, required=handler != self._validate_yaml)
                    return handler(request, groups)
                except HubError as exc:
                    return _error(exc)
                except Exception as exc:  # a bug in the stub: fail fast (a 5xx would be retried)
                    self.failures.append(f"{route}: {exc!r}")
                    return _error(HubError(400, f"hub stub failure: {exc!r}"))
            self.unexpected.append(f"{request.method} /{request.path}")
            return _error(HubError(404, "Sorry, we can't find the page you are looking for."))

    def _authorize(self, request: Request, *, required: bool) -> None:
        given = request.headers.get("Authorization")
        if given is None and not required:
            return
        if given is None:
            raise HubError(401, "You must be authenticated to access this resource")
        if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
            raise HubError(401, INVALID_CREDENTIALS)

    def _repo(self, groups: dict[str, str]) -> Repo:
        repo_type = (
            _TYPES[groups["type"]] if "type" in groups else _prefix_type(groups.get("prefix"))
        )
        repo = self.repos.get((repo_type, groups["repo"]))
        if repo is None:
            raise HubError(404, "Repository not found", "RepoNotFound")
        return repo

    @staticmethod
    def _resolve(repo: Repo, revision: str) -> str:
        if revision in repo.refs:
            return repo.refs[revision]
        if revision in repo.commits:
            return revision
        raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")

    def _url(self, repo: Repo, *rest: str) -> str:
        return "/".join([f"{self.endpoint}/{_PREFIX[repo.repo_type]}{repo.repo_id}", *rest])

    def _new_commit(
        self, repo: Repo, parent: str | None, title: str, description: str, files: dict[str, Blob]
    ) -> str:
        self._counter += 1
        digest = hashlib.sha1(f"{self._counter}\0{parent}\0{title}".encode())
        for path in sorted(files):
            digest.update(f"\0{path}\0{files[path].oid}".encode())
        oid = digest.hexdigest()
        repo.commits[oid] = Commit(oid, parent, title, description, dict(files))
        return oid

    def _is_lfs(self, path: str) -> bool:
        return bool(self.lfs_suffixes) and path.endswith(self.lfs_suffixes)

    # ------------------------------------------------------------------ repos and refs

    def _create_repo(self, request: Request, groups: dict[str, str]) -> Response:
        payload = request.json()
        self.created.append(payload)
        name, organization = payload.get("name"), payload.get("organization")
        repo_type = payload.get("type") or "model"
        if repo_type not in _PREFIX or not isinstance(name, str) or not _NAME.fullmatch(name):
            raise HubError(400, "Invalid repo name or type")
        repo_id = f"{organization or self.user}/{name}"
        namespace = repo_id.split("/")[0]
        visibility = payload.get(
            "visibility", "private" if namespace in self.private_by_default else "public"
        )
        if visibility not in ("public", "private"):
            raise HubError(400, f"Invalid visibility: {visibility}")
        key = (repo_type, repo_id)
        if key in self.repos:
            repo = self.repos[key]
            raise HubError(409, f"You already created this {repo_type} repo", url=self._url(repo))
        repo = self.repos[key] = Repo(repo_type, repo_id, private=visibility == "private")
        repo.refs["main"] = self._new_commit(repo, None, "initial commit", "", {})
        return Response(200, {"url": self._url(repo), "name": repo_id, "id": secrets.token_hex(12)})

    def _repo_info(self, request: Request, groups: dict[str, str]) -> Response:
        repo = self._repo(groups)
        oid = self._resolve(repo, groups.get("rev") or "main")
        return Response(
            200,
            {
                "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
                "id": repo.repo_id,
                "author": repo.repo_id.split("/")[0],
                "sha": oid,
                "private": repo.private,
                "disabled": False,
                "gated": False,
                "siblings": [{"rfilename": path} for path in sorted(repo.commits[oid].files)],
            },
        )

    def _create_branch(self, request: Request, groups: dict[str, str]) -> Response:
        repo = self._repo(groups)
        branch = groups["branch"]
        payload = request.json() or {}
        if branch in repo.refs:
            raise HubError(409, "Reference already exists")
        if branch.startswith("refs/") or not _NAME.fullmatch(branch):
            raise HubError(400, f"Invalid branch name: {branch}")
        repo.refs[branch] = self._resolve(repo, payload.get("startingPoint") or "main")
        return Response(200, {})

    # ------------------------------------------------------------------ reading

    def _tree(self, request: Request, groups: dict[str, str]) -> Response:
        repo = self._repo(groups)
        files = repo.commits[self._resolve(repo, groups["rev"])].files
        base = (groups.get("path") or "").strip("/")
        recursive = request.query.get("recursive", "false").lower() in ("true", "1")
        prefix = f"{base}/" if base else ""
        folders: set[str] = set()
        entries: list[dict[str, Any]] = []
        for path in sorted(files):
            if not path.startswith(prefix):
                continue
            parts = path[len(prefix) :].split("/")
            for depth in range(1, len(parts) if recursive else min(2, len(parts))):
                folders.add(prefix + "/".join(parts[:depth]))
            if recursive or len(parts) == 1:
                blob = files[path]
                entry: dict[str, Any] = {
                    "type": "file",
                    "oid": blob.oid,
                    "size": len(blob.data),
                    "path": path,
                }
                if blob.lfs:
                    pointer = _lfs_pointer(blob.data)
                    entry["lfs"] = {
                        "oid": hashlib.sha256(blob.data).hexdigest(),
                        "size": len(blob.data),
                        "pointerSize": len(pointer),
                    }
                entries.append(entry)
        if base and not folders and not entries:
            raise HubError(404, f'{base} does not exist on "{groups["rev"]}"', "EntryNotFound")
        entries += [
            {"type": "directory", "oid": hashlib.sha1(f.encode()).hexdigest(), "size": 0, "path": f}
            for f in folders
        ]
        entries.sort(key=lambda e: (e["type"] != "directory", e["path"]))
        start = int(request.query.get("cursor", "0"))
        page = entries[start : start + self.tree_page_size]
        headers = {}
        if start + self.tree_page_size < len(entries):
            query = (
                f"recursive={str(recursive).lower()}&expand=false"
                f"&cursor={start + self.tree_page_size}"
            )
            headers["Link"] = f'<{self.endpoint}/{request.path}?{query}>; rel="next"'
        return Response(200, page, headers)

    # ------------------------------------------------------------------ writing

    def _preupload(self, request: Request, groups: dict[str, str]) -> Response:
        repo = self._repo(groups)
        head = self._resolve(repo, groups["rev"])
        files = repo.commits[head].files
        answer = []
        for item in request.json().get("files", []):
            path, size = item["path"], item["size"]
            base64.b64decode(item["sample"], validate=True)
            existing = files.get(path)
            remote_oid = None
            if existing is not None:
                remote_oid = (
                    hashlib.sha256(existing.data).hexdigest() if existing.lfs else existing.oid
                )
            mode = "lfs" if self._is_lfs(path) and size > 0 else "regular"
            answer.append(
                {"path": path, "uploadMode": mode, "shouldIgnore": False, "oid": remote_oid}
            )
        return Response(200, {"files": answer, "commitOid": head})

    def _commit(self, request: Request, groups: dict[str, str]) -> Response:
        repo = self._repo(groups)
        revision = groups["rev"]
        if request.headers.get("Content-Type", "").split(";")[0] != "application/x-ndjson":
            raise HubError(400, "Expected application/x-ndjson")
        if revision not in repo.refs:  # commits go to a branch or a pull request's ref
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        lines = [json.loads(line) for line in request.body.splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "The first line must be the commit header")
        header = lines[0]["value"]
        title = header.get("summary") or ""
        if not title:
            raise HubError(400, "Commit summary is required")
        create_pr = request.query.get("create_pr") == "1"
        head = repo.refs[revision]
        parent_commit = header.get("parentCommit")
        if parent_commit and not create_pr and not head.startswith(parent_commit):
            raise HubError(412, "A commit has happened since. Please refresh and try again.")
        files = dict(repo.commits[head].files)
        for line in lines[1:]:
            key, value = line.get("key"), line.get("value") or {}
            path = value.get("path", "")
            if key == "file":
                if value.get("encoding") != "base64":
                    raise HubError(400, f"Unsupported encoding for {path}")
                data = base64.b64decode(value["content"], validate=True)
                if data and self._is_lfs(path):
                    raise HubError(400, f"{path} is tracked by LFS: commit it as an lfsFile")
                files[path] = Blob(data)
            elif key == "lfsFile":
                oid = value.get("oid", "")
                if value.get("algo") != "sha256" or oid not in self._verified:
                    raise HubError(
                        422, f"LFS object {oid} for {path} was never uploaded and verified"
                    )
                if value.get("size") not in (None, len(self._uploaded[oid])):
                    raise HubError(422, f"LFS object {oid} for {path} has another size")
                files[path] = Blob(self._uploaded[oid], lfs=True)
            elif key == "deletedFile":
                if path not in files:
                    raise HubError(404, "A file with this name doesn't exist", "EntryNotFound")
                del files[path]
            elif key == "deletedFolder":
                inside = [p for p in files if p.startswith(path.rstrip("/") + "/")]
                if not inside:
                    raise HubError(404, "A folder with this name doesn't exist", "EntryNotFound")
                for p in inside:
                    del files[p]
            else:
                raise HubError(400, f"Unknown commit operation {key!r}")
        body: dict[str, Any] = {"success": True, "hookOutput": ""}
        if create_pr:
            pull = self._open_pull(repo, title, header.get("description") or "", base=revision)
            revision = f"refs/pr/{pull.num}"
            body["pullRequestUrl"] = self._url(repo, "discussions", str(pull.num))
        oid = self._new_commit(
            repo, repo.refs[revision], title, header.get("description") or "", files
        )
        repo.refs[revision] = oid
        body |= {"commitOid": oid, "commitUrl": self._url(repo, "commit", oid)}
        return Response(200, body)

    def _open_pull(self, repo: Repo, title: str, description: str, *, base: str) -> PullRequest:
        num = len(repo.pulls) + 1
        now = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        pull = repo.pulls[num] = PullRequest(num, title, description, base, now)
        repo.refs[f"refs/pr/{num}"] = repo.refs[base]
        return pull

    def _create_discussion(self, request: Request, groups: dict[str, str]) -> Response:
        repo = self._repo(groups)
        payload = request.json()
        if payload.get("pullRequest") is not True:
            raise HubError(400, "hub stub: only pull requests are supported")
        title = (payload.get("title") or "").strip()
        if len(title) < 3:
            raise HubError(400, "Title is too short")
        pull = self._open_pull(repo, title, payload.get("description") or "", base="main")
        return Response(
            200,
            {
                "num": pull.num,
                "pullRequest": True,
                "url": self._url(repo, "discussions", str(pull.num)),
            },
        )

    def _discussion(self, request: Request, groups: dict[str, str]) -> Response:
        repo = self._repo(groups)
        pull = repo.pulls.get(int(groups["num"]))
        if pull is None:
            raise HubError(404, "Discussion not found")
        return Response(
            200,
            {
                "num": pull.num,
                "title": pull.title,
                "status": "draft",
                "createdAt": pull.created_at,
                "author": {"name": self.user},
                "repo": {"name": repo.repo_id, "type": repo.repo_type},
                "isPullRequest": True,
                "events": [],
                "changes": {"base": f"refs/heads/{pull.base}"},
                "filesWithConflicts": [],
                "diff": "",
            },
        )

    # ------------------------------------------------------------------ git-LFS

    def _sign(self, oid: str, size: int) -> str:
        return hmac.new(self._secret, f"{oid}:{size}".encode(), "sha256").hexdigest()

    def _lfs_batch(self, request: Request, groups: dict[str, str]) -> Response:
        repo = self._repo(groups)
        payload = request.json()
        if payload.get("operation") != "upload" or payload.get("hash_algo", "sha256") != "sha256":
            raise HubError(400, "hub stub: only sha256 uploads are supported")
        objects = []
        for obj in payload.get("objects", []):
            oid, size = obj["oid"], obj["size"]
            entry: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
            if oid not in self._verified:
                query = f"size={size}&signature={self._sign(oid, size)}"
                entry["actions"] = {
                    "upload": {
                        "href": f"{self.endpoint}/_storage/{oid}?{query}",
                        "expires_in": 900,
                    },
                    "verify": {
                        "href": self._url(repo).rstrip("/") + ".git/info/lfs/objects/verify"
                    },
                }
            objects.append(entry)
        return Response(200, {"transfer": "basic", "objects": objects, "hash_algo": "sha256"})

    def _storage_put(self, request: Request, groups: dict[str, str]) -> Response:
        oid = groups["oid"]
        size = int(request.query.get("size", "-1"))
        if not hmac.compare_digest(request.query.get("signature", ""), self._sign(oid, size)):
            raise HubError(403, "SignatureDoesNotMatch")
        if len(request.body) != size or hashlib.sha256(request.body).hexdigest() != oid:
            raise HubError(
                400, "BadDigest: the content does not match the announced sha256 and size"
            )
        self._uploaded[oid] = request.body
        return Response(200, None, {"ETag": f'"{hashlib.md5(request.body).hexdigest()}"'})

    def _lfs_verify(self, request: Request, groups: dict[str, str]) -> Response:
        self._repo(groups)
        payload = request.json()
        oid = payload.get("oid")
        if oid not in self._uploaded or len(self._uploaded[oid]) != payload.get("size"):
            raise HubError(404, f"Object {oid} not found in storage")
        self._verified.add(oid)
        return Response(200, {"success": True})

    # ------------------------------------------------------------------ YAML

    def _validate_yaml(self, request: Request, groups: dict[str, str]) -> Response:
        content = request.json().get("content", "")
        match = re.match(r"---\n(.*?)\n---\n", content, re.S)
        if match is None:
            return Response(
                200, {"errors": [], "warnings": [{"message": "Empty or missing yaml metadata"}]}
            )
        try:
            metadata = yaml.safe_load(match.group(1))
        except yaml.YAMLError as exc:
            return Response(400, {"errors": [{"message": f"Invalid YAML: {exc}"}], "warnings": []})
        if not isinstance(metadata, dict):
            return Response(
                400, {"errors": [{"message": "Metadata must be a mapping"}], "warnings": []}
            )
        return Response(200, {"errors": [], "warnings": []})


def _prefix_type(prefix: str | None) -> str:
    return {"datasets/": "dataset", "spaces/": "space"}.get(prefix or "", "model")


def _error(exc: HubError) -> Response:
    headers = {"X-Error-Message": exc.message}
    if exc.code:
        headers["X-Error-Code"] = exc.code
    return Response(exc.status, {"error": exc.message, **exc.extra}, headers)


def _handler(hub: HubStub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the Hub: every answer has a Content-Length

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline().strip():  # trailers
                            pass
                        return b"".join(chunks)
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _serve(self) -> None:
            url = urlsplit(self.path)
            request = Request(
                method=self.command,
                path=url.path.lstrip("/"),
                query={k: v[-1] for k, v in parse_qs(url.query).items()},
                headers=self.headers,
                body=self._body(),
            )
            response = hub.handle(request)
            data = b"" if response.body is None else json.dumps(response.body).encode()
            self.send_response(response.status)
            if response.body is not None:
                self.send_header("Content-Type", "application/json; charset=utf-8")
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

    return Handler

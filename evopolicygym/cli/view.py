"""``evopolicy view``: a live local web viewer of a store (read-only).

Starlette, uvicorn and Jinja2 are the ``view`` extra: this module imports them (through
``evopolicygym.view``) only when the command runs, so ``--help`` works without them.
"""

from __future__ import annotations

import functools
import importlib.util
import webbrowser
from pathlib import Path

import click

from evopolicygym.cli.errors import CliError
from evopolicygym.cli.options import finite, not_empty, store_option
from evopolicygym.cli.serve_env import check_access
from evopolicygym.cli.stores import open_existing, store_root
from evopolicygym.serving import url_of

__all__ = ["view"]

TOKEN_ENV = "EVOPOLICY_VIEW_TOKEN"
INSTALL = "uv sync --extra view (or pip install 'evopolicygym[view]')"
_NEEDS = ("starlette", "uvicorn", "jinja2")


@click.command(short_help="Browse a store in a live local web viewer.")
@store_option(" (read only: the viewer never writes it)")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    callback=not_empty,
    help="Address to listen on; any but a loopback one needs a token.",
)
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8765,
    show_default=True,
    help="TCP port (0: any free one, printed at start).",
)
@click.option("--open", "open_browser", is_flag=True, help="Open the viewer in a web browser.")
@click.option(
    "--token",
    envvar=TOKEN_ENV,
    show_envvar=True,
    metavar="TOKEN",
    help="Secret every request must carry (the printed address sets it as a cookie; or "
    "Authorization: Bearer TOKEN), at least 16 characters; required with a --host other "
    "than loopback. Prefer the variable: a command line is visible to other users.",
)
@click.option(
    "--cache",
    "cache_dir",
    metavar="DIR",
    callback=not_empty,
    help="Where the viewer keeps its index of the store's Runs (a cache, outside the store) "
    "[default: $EVOPOLICY_VIEW_CACHE, else the user's cache directory].",
)
@click.option(
    "--poll",
    type=click.FloatRange(min=0.05, max=60),
    callback=finite,
    default=0.5,
    show_default=True,
    help="Seconds between looks at the store for new events (open pages update after).",
)
def view(
    store_dir: str | None,
    host: str,
    port: int,
    open_browser: bool,
    token: str | None,
    cache_dir: str | None,
    poll: float,
) -> None:
    """Serve a live, read-only web viewer of the store on this machine: its Runs (filter,
    sort, page), each Run (Submissions, evolution tree, plots, programs and diffs, Feedback
    and videos, the Agent's conversation, Validation and Assessment, the event log),
    experiments and a comparison of two Runs. Pages follow the store while other processes
    record. Stops on Ctrl-C.

    \b
    Example:
      evopolicy view --store evopolicy-store --open
      EVOPOLICY_VIEW_TOKEN=... evopolicy view --host 0.0.0.0 --port 8765
    """
    check_access(host, token, TOKEN_ENV)
    missing = [name for name in _NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        raise CliError(f"view needs the view extra ({', '.join(missing)}): {INSTALL}")
    from evopolicygym.redaction import Redactor
    from evopolicygym.run.liveness import host_alive
    from evopolicygym.serving import listen, serve
    from evopolicygym.view import create_app, default_cache_dir

    location = store_root(click.get_current_context(), store_dir)
    store = open_existing(location, reader=True)
    try:
        try:
            sock = listen(host, port)
        except OSError as exc:
            raise CliError(f"cannot listen on {url_of(host, port)}: {exc.strerror or exc}") from exc
        app = create_app(
            store,
            redact=Redactor().text,
            cache_dir=Path(cache_dir) if cache_dir else default_cache_dir(),
            token=token,
            bound_host=host,
            host_alive=functools.partial(host_alive, store),
            poll_s=poll,
        )
        url = url_of(host, sock.getsockname()[1])
        shown = f"{url}/?token=..." if token else f"{url}/"
        click.echo(f"viewing {location} on {shown} (Ctrl-C stops)")
        if open_browser:
            webbrowser.open(f"{url}/?token={token}" if token else f"{url}/")
        serve(app, sock, graceful_s=1)
    finally:
        store.close()

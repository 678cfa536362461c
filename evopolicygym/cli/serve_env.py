"""``evopolicy serve-env``: the training environment served over OpenEnv.

openenv-core is the ``training`` extra: this module imports it (through
``evopolicygym.training.openenv_server``) only when the command runs, so ``--help`` works
without it and ``evopolicy --help`` imports none of it.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

import click

from evopolicygym.cli.errors import CliError, CliUsageError
from evopolicygym.cli.options import finite, not_empty, store_option
from evopolicygym.cli.stores import check_store_dir, store_root
from evopolicygym.serving import is_loopback, url_of

__all__ = ["check_access", "serve_env"]

TOKEN_ENV = "EVOPOLICY_SERVE_TOKEN"
MIN_TOKEN_CHARS = 16
INSTALL = "uv sync --extra training (or pip install 'evopolicygym[training]')"
NEW_TOKEN = "python -c 'import secrets; print(secrets.token_urlsafe(32))'"


def check_access(host: str, token: str | None, token_env: str = TOKEN_ENV) -> None:
    """Any address but this machine's own needs a token (``token_env`` names its variable):
    the training server runs submitted programs, the viewer shows a whole store."""
    if token is not None and (len(token) < MIN_TOKEN_CHARS or token != token.strip()):
        raise CliUsageError(
            f"--token (or ${token_env}) must be at least {MIN_TOKEN_CHARS} characters, without "
            f"surrounding spaces; make one with: {NEW_TOKEN}"
        )
    if token is None and not is_loopback(host):
        raise CliUsageError(
            f"--host {host} is reachable from other machines, so it needs a token: "
            f"export {token_env}=$({NEW_TOKEN}) (or give --token)"
        )


@click.command("serve-env", short_help="Serve the training environment over OpenEnv.")
@store_option(" (where the sessions' Runs are recorded; created if missing)")
@click.option(
    "--dataset",
    metavar="DIR",
    callback=not_empty,
    help="An exported dataset (`evopolicy export --format rl`) whose rows reset may name by "
    "task_id= or index= [default: none; reset then takes whole rows].",
)
@click.option(
    "--config",
    metavar="NAME",
    callback=not_empty,
    help="The dataset's config [default: rl_tools if it has one, else rl].",
)
@click.option(
    "--split",
    metavar="NAME",
    default="train",
    show_default=True,
    callback=not_empty,
    help="The dataset's split served.",
)
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
    default=8000,
    show_default=True,
    help="TCP port (0: any free one, printed at start).",
)
@click.option(
    "--token",
    envvar=TOKEN_ENV,
    show_envvar=True,
    metavar="TOKEN",
    help="Secret every request must carry (Authorization: Bearer TOKEN), at least 16 "
    "characters; required with a --host other than loopback. Prefer the variable: a command "
    "line is visible to other users of the machine.",
)
@click.option(
    "--max-sessions",
    type=click.IntRange(min=1, max=1024),
    default=4,
    show_default=True,
    help="WebSocket sessions (so Runs) at once; one more is refused.",
)
@click.option("--model", metavar="NAME", help="Model name recorded as the Runs' Agent's.")
@click.option(
    "--seed",
    type=click.IntRange(min=0, max=2**63 - 1),
    default=0,
    show_default=True,
    help="Mixed into every Run's seed (with the row's task).",
)
@click.option(
    "--episode-budget",
    type=click.IntRange(min=1, max=1_000_000),
    default=None,
    help="Episode budget of every Run [default: the row's].",
)
@click.option(
    "--validation-episodes",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="Hidden Episodes each candidate is validated on.",
)
@click.option(
    "--assessment-episodes",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Held-out Episodes the selected program is assessed on (the reward's evidence).",
)
@click.option(
    "--agent-timeout",
    type=click.FloatRange(min=0, max=30 * 86_400, min_open=True),
    callback=finite,
    default=None,
    help="Wall-clock seconds a session's model may work on one Run [default: the row's].",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Parallel Episodes of each session's Run [default: CPUs].",
)
def serve_env(store_dir: str | None, **options: Any) -> None:
    """Serve the training environment (the one TRL's environment_factory takes) over OpenEnv:
    each WebSocket session at /ws holds one environment; `reset` (task_id=, index= or a whole
    rl row) starts a real Run in the store and answers its task, and `step` calls one tool
    (list_files, read_file, write_file, submit, finish) as openenv's CallToolAction. When
    `finish` is accepted the observation is done, with the Run's held-out reward. HTTP serves
    /health, /metadata and /schema. Stops on Ctrl-C; a session's open Run is concluded when
    the session closes.

    \b
    Example:
      evopolicy export --format rl --output tasks
      evopolicy serve-env --dataset tasks --port 8000
      EVOPOLICY_SERVE_TOKEN=... evopolicy serve-env --dataset tasks --host 0.0.0.0
    """
    check_access(options["host"], options["token"])
    if importlib.util.find_spec("openenv") is None:
        raise CliError(f"serve-env needs the training extra (openenv-core): {INSTALL}")
    from evopolicygym.training import openenv_server as served

    ctx = click.get_current_context()
    check_store_dir(store_dir)
    location = store_root(ctx, store_dir)
    _prepare_store(location)
    tasks, source = _tasks(served, options)
    make_env = functools.partial(
        _new_env,
        store=location,
        model=options["model"],
        seed=options["seed"],
        episode_budget=options["episode_budget"],
        validation_episodes=options["validation_episodes"],
        assessment_episodes=options["assessment_episodes"],
        agent_timeout=options["agent_timeout"],
        jobs=options["jobs"],
    )
    app = served.create_app(
        make_env, tasks, max_sessions=options["max_sessions"], token=options["token"]
    )
    host, port = options["host"], options["port"]
    try:
        sock = served.listen(host, port)
    except OSError as exc:
        raise CliError(f"cannot listen on {url_of(host, port)}: {exc.strerror or exc}") from exc
    url = url_of(host, sock.getsockname()[1])
    click.echo(f"serving the training environment on {url} (sessions: {url}/ws){source}")
    served.serve(app, sock)


def _prepare_store(location: Any) -> None:
    """The store opens (is made, if missing) before a session needs it, so a bad one is an
    error now, not a session's failure later."""
    from evopolicygym.records.location import open_store
    from evopolicygym.records.store import StoreError

    try:
        with open_store(location, create=True):
            pass
    except StoreError as exc:
        raise CliError(str(exc)) from exc


def _tasks(served: Any, options: dict[str, Any]) -> tuple[Any, str]:
    """The served rows, and how the start line names them."""
    directory = options["dataset"]
    if directory is None:
        if options["config"] is not None:
            raise CliUsageError("--config needs --dataset")
        return served.TaskRows(), "; no dataset: reset takes whole rows"
    try:
        tasks, config = served.load_tasks(directory, options["config"], options["split"])
    except served.DatasetError as exc:
        raise CliError(f"--dataset {exc}") from exc
    return tasks, f"; {len(tasks)} tasks of {directory} ({config}, {options['split']})"


def _new_env(**options: Any) -> Any:
    from evopolicygym.training import PolicyEvolutionEnv

    return PolicyEvolutionEnv(**options)

"""The Agent's task, written once into its workspace: TASK.md for reading, task.json for tools."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from evopolicygym.run.config import RunConfig
from evopolicygym.run.skills import Skill

__all__ = ["task_files"]


def task_files(
    spec: dict[str, Any], config: RunConfig, skills: Sequence[Skill] = ()
) -> tuple[str, bytes]:
    """(TASK.md, task.json) for a Run on the Benchmark with public spec ``spec``."""
    facts: dict[str, Any] = {
        "benchmark": spec,
        "episode_budget": config.episode_budget,
        "episode_pool_size": config.pool_size,
        "max_submissions": config.submission_limit,
        "max_episodes_per_submission": config.episode_limit,
        "finish_budget_policy": config.finish_budget_policy,
        "max_candidates": config.validation.max_candidates,
        "episode_timeout_s": config.episode_timeout,
        "agent_timeout_s": config.agent_timeout,
    }
    if skills:
        facts["skills"] = [{"name": s.name, "description": s.description} for s in skills]
    task_json = (json.dumps(facts, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()
    direction = "higher" if spec.get("score_direction") == "maximize" else "lower"
    finish_rule = (
        "You may finish at any time."
        if config.finish_budget_policy == "allow_early"
        else "You must spend the whole Episode budget before `finish` is accepted."
    )
    selection = (
        f"The Host evaluates every candidate you name on the same hidden validation Episodes "
        f"and keeps the best ({direction} score, then fewer policy failures, then your order); "
        "the kept program is then measured once on held-out Episodes. You never see either."
        if config.validation.enabled
        else "Your first candidate becomes the final program."
    )
    skills_md = ""
    if skills:
        listed = "\n".join(
            f"- `skills/{s.name}/SKILL.md`" + (f" — {s.description}" if s.description else "")
            for s in skills
        )
        skills_md = f"\n## Skills (read these first)\n{listed}\n"
    task_md = f"""# Task: evolve a policy for `{spec.get("id")}`

{spec.get("description", "")}

Improve the policy program in `program/` so that it scores as {direction} as possible
(metric: {spec.get("primary_metric", "score")}).

## Workspace
- `program/` — the policy you edit. `policy.py` defines `make_policy(context)` returning an
  object with `act(observation) -> action`. One fresh process per Episode; standard library
  and numpy are available. `context` has observation_space, action_space, metadata,
  environment_parameters and policy_seed.
- `feedback/` — read-only. After each submission, `feedback/submission-NNNN/feedback.json`
  (Episodes, budget used and left, score, public content, per-Episode summaries, artifacts)
  and `feedback/latest.json`.
- `analysis/` — yours, for notes and scripts.
- `task.json` — these facts in machine-readable form, with the Benchmark's public spec.

## Session (your only access to the Environment)
- `evopolicy session submit [DIR] --episodes SELECTOR` evaluates a program (default
  `program/`) on Episodes of the pool, addressed by index `0..{config.pool_size - 1}`:
  `3`, `0:4` (half-open), `0:2,4:8` (strictly increasing, non-overlapping). Reusing indices
  compares programs on identical Episodes and costs budget again.
- `evopolicy session finish ID [ID...]` ends your work, naming up to
  {config.validation.max_candidates} Submission ids as candidates, best first.
- Success prints JSON on stdout (exit 0); a rejection prints `{{"error": {{"code", "message"}}}}`
  on stderr (exit 1).

## Limits
- Episode budget: {config.episode_budget}; at most {config.submission_limit} submissions of at
  most {config.episode_limit} Episodes each. {finish_rule}
- Each Episode gives the policy {config.episode_timeout:g} s; you have
  {config.agent_timeout:g} s in all.
- {selection}
- Running, importing or probing the Environment outside the session is forbidden.
{skills_md}"""
    return task_md, task_json

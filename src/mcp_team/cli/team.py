"""`mcp-team init` writes a starter team file; `mcp-team check` validates one and shows the team (with `--http`,
also the HTTP server's auth set-up, its issuer asked whether it answers)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from mcp_team.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    auth_flags,
    console,
    error,
    print_table,
    team_flag,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mcp_team.cli.common import Subparsers
    from mcp_team.llm.settings import MemberModel, ModelSettings
    from mcp_team.teamfile.loading import TeamSpec


def add_parsers(sub: Subparsers) -> None:
    init = sub.add_parser("init", help="write a commented starter team.toml (the default team, or a preset)")
    init.add_argument("path", nargs="?", default="team.toml", help="where to write it (default: team.toml)")
    init.add_argument("--preset", help="start from a preset team (see --list)")
    init.add_argument("--list", action="store_true", help="list the presets")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.set_defaults(handler=init_command)

    check = sub.add_parser(
        "check",
        help="validate a team file, show the team, and ask its model servers what they serve",
        description="Validate a team file and show the team, each role's model and where it was set. An "
        "OpenAI-compatible server of your own (OPENAI_BASE_URL) is asked which model names it serves (GET /models).",
    )
    check.add_argument("path", nargs="?", help="the team file (default: the one `serve` would load)")
    team_flag(check)  # as `run` and `serve` take it
    check.add_argument(
        "--http", action="store_true", help="also show how `serve --http` checks clients, and ask its issuer"
    )
    check.add_argument("--host", help="with --http: the bind address `serve` would get")
    check.add_argument("--port", type=int, help="with --http: the port `serve` would get")
    auth_flags(check)
    check.add_argument("--model", metavar="PROVIDER[:MODEL]", help="check as `run --model` would run")
    check.add_argument(
        "--probe",
        action="store_true",
        help="also make one small test call per server, to learn whether its model returns native tool calls "
        "(it costs a call)",
    )
    check.set_defaults(handler=check_command)


def init_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mcp_team.teamfile.starter import PRESETS, preset_text, render_team_file

    if args.list:
        for name in PRESETS:
            print(name)
        return EXIT_OK
    path = Path(args.path)
    text = preset_text(args.preset) if args.preset else render_team_file()  # an unknown preset is said first
    if path.is_dir():
        return error(f"{path} is a directory; give a file name, e.g. {path / 'team.toml'}", EXIT_USAGE)
    if path.exists() and not args.force:
        return error(f"{path} already exists; pass --force to overwrite it", EXIT_USAGE)
    if not path.parent.is_dir():
        return error(f"the directory {path.parent} does not exist; create it first, or write elsewhere", EXIT_USAGE)
    path.write_text(text, encoding="utf-8")
    print(f"mcp-team: wrote {path}" + (f" (preset {args.preset})" if args.preset else ""), file=sys.stderr)
    return EXIT_OK


def check_command(args: argparse.Namespace) -> int:
    from rich.table import Table

    from mcp_team.cli.settings import process_settings
    from mcp_team.errors import ConfigError
    from mcp_team.llm.building import describe_model
    from mcp_team.teamfile.loading import load_team

    if args.path and args.team and args.path != args.team:
        return error(f"two team files given ({args.path} and --team {args.team}); check one at a time", EXIT_USAGE)
    try:
        spec = load_team(args.team or args.path or process_settings(args).team_file)
        team = spec.build(None, lenient=True)
    except ConfigError as exc:  # a team file that does not load is bad configuration, for `check` as for `run`
        print(f"mcp-team: {exc}", file=sys.stderr)
        return EXIT_USAGE
    table = Table(title=f"{spec.source}: {len(team)} specialists, {spec.run_settings.mode} mode")
    table.add_column("name", no_wrap=True)
    table.add_column("description", ratio=3)
    table.add_column("tools", ratio=1)
    for column in ("max turns", "token budget", "model role"):
        table.add_column(column, no_wrap=True)
    table.add_column("model", ratio=1)
    grants = {s.name: s.tools for s in spec.model.specialists} if spec.model else {}
    settings, members = _model_settings(spec, args.model), spec.member_models
    for s in team:
        tools = grants.get(s.name) or [t.name for t in s.tools]
        model = describe_model(settings, s.model_role, members.get(s.name)) if settings else "-"
        if (sub := getattr(s, "members", None)) is not None:  # a member that is a team (handoffs/subteam.py)
            tools = ["team: " + ", ".join(m.name for m in sub)]
        table.add_row(
            s.name,
            s.description,
            ", ".join(tools) or "-",
            str(s.max_turns),
            str(s.max_tokens or "-"),
            s.model_role,
            model,
        )
    print_table(console(), table)
    if settings is not None:
        asked = _print_servers(settings, spec, args.probe)
        _print_roles(settings, spec, asked)
    if spec.mcp_servers:
        print("MCP servers: " + ", ".join(m.name for m in spec.mcp_servers))
    # A warning, not a failure: the file is valid, and where check runs (a CI lint job) the secrets often are not.
    for problem in _unset_keys(settings, members):
        print(f"mcp-team: warning: {problem}", file=sys.stderr)
    return _check_http(args) if args.http else EXIT_OK


def _check_http(args: argparse.Namespace) -> int:
    """The auth `serve --http` would have with these flags and the environment; with an issuer, its metadata
    and keys fetched as the server would (exit 1 when it does not answer, or answers wrong)."""
    import anyio
    from pydantic import ValidationError

    from mcp_team.cli.settings import settings_problems
    from mcp_team.errors import ConfigError
    from mcp_team.server.oauth.issuer import probe
    from mcp_team.server.oauth.metadata import DiscoveryError
    from mcp_team.server.oauth.settings import OAuthSettings, is_loopback
    from mcp_team.server.transports.http import HttpSettings, check_bind, resource_server

    flags = {"host": args.host, "port": args.port, "public_url": args.public_url}
    try:
        http = HttpSettings(**{k: v for k, v in flags.items() if v is not None})
        oauth = OAuthSettings(**({"issuer": args.auth_issuer} if args.auth_issuer is not None else {}))
        check_bind(http, oauth)
        resource = resource_server(http, oauth, http.port)
    except ValidationError as exc:  # bad configuration, as `serve --http` says it: exit 2
        return error(f"invalid settings: {'; '.join(settings_problems(exc, HttpSettings, OAuthSettings))}", EXIT_USAGE)
    except ConfigError as exc:
        return error(str(exc), EXIT_USAGE)
    print(f"HTTP: http://{http.host}:{http.port}/mcp")
    if resource is None:
        if http.http_token is not None:
            print("auth: one static bearer token (MCP_TEAM_HTTP_TOKEN): a server for one person; whoever has the "
                  "token sees every run (for several people: --auth-issuer)")  # fmt: skip
        else:
            where = "loopback: anyone on this machine" if is_loopback(http.host) else http.host
            print(f"auth: none ({where} can connect)")
        return EXIT_OK
    for line in resource.describe():
        print(line)
    try:
        for line in anyio.run(probe, oauth):
            print(f"  {line}")
    except DiscoveryError as exc:
        return error(str(exc), EXIT_FAILED)
    return EXIT_OK


def _print_servers(settings: ModelSettings, spec: TeamSpec, probe: bool) -> set[str]:
    """Ask each OpenAI-compatible server of the team which models it serves (and, with `probe`, whether its tool
    calls come back native), print what each said and warn of a name it does not serve; the endpoints that
    answered."""
    import functools
    import os

    import anyio

    from mcp_team.errors import ConfigError
    from mcp_team.llm.building import build_models
    from mcp_team.llm.served import endpoints, inquire

    try:
        models = build_models(settings, spec.member_models, environ=os.environ)
    except ConfigError:
        return set()  # what is missing is said below (a key, a model string)
    members = [("the supervisor", models.for_role("supervisor")), ("the specialists", models.for_role("specialist"))]
    members += [(f"specialist {name!r}", model) for name, model in models.members.items()]
    found = endpoints(members)
    if not found:
        return set()
    anyio.run(functools.partial(inquire, found, probe=probe))
    for endpoint in found:
        for line in endpoint.lines():
            print(line)
        for warning in endpoint.warnings():
            print(f"mcp-team: warning: {warning}", file=sys.stderr)
    return {e.url.rstrip("/") for e in found if e.served is not None}


def _print_roles(settings: ModelSettings, spec: TeamSpec, asked: set[str]) -> None:
    """Each role's model and endpoint, and the setting each came from: a wrong pair (OpenAI's default model name
    on a local server) shows here, not as the first call's 404."""
    import os

    from mcp_team.llm.origins import default_name_elsewhere, role_model

    roles = [
        role_model(settings, role, spec.model_overrides, spec.source, os.environ)
        for role in ("supervisor", "specialist")
    ]
    for r in roles:
        fallback = getattr(settings, f"{r.role}_fallback")
        label = "supervisor (and planner)" if r.role == "supervisor" else "specialists (unless their own)"
        print(f"{label}: {r.line}" + (f" (fallback {fallback})" if fallback else ""))
        if r.origin:
            print(f"    {r.origin}")
    if (warning := default_name_elsewhere(roles, asked)) is not None:
        print(f"mcp-team: warning: {warning}", file=sys.stderr)


def _unset_keys(settings: ModelSettings | None, members: Mapping[str, MemberModel]) -> list[str]:
    """The members whose `api_key_env` names a variable that is not set: `run` and `serve` stop on it (llm/settings
    `_build`) unless the whole team runs on a model that needs no key (offline, sampling, replay)."""
    import os

    from mcp_team.llm.settings import parse_model

    if settings is not None and settings.model is not None:
        try:
            if parse_model(settings.model).provider in ("offline", "sampling", "replay"):
                return []
        except ValueError:
            pass  # a model string `run` refuses: it says so itself
    return [
        f"specialist {name!r}: its API key variable {m.api_key_env} is not set, so run and serve would stop on "
        f"it; export {m.api_key_env}=<its key>, or remove api_key_env from its entry"
        for name, m in members.items()
        if m.api_key_env is not None and not os.environ.get(m.api_key_env)
    ]


def _model_settings(spec: TeamSpec, model: str | None = None) -> ModelSettings | None:
    """The model settings `run` and `serve` would use with this team (the environment, `--model`, then the file's
    `[models]`); None when the environment's are invalid (`run` reports that)."""
    from pydantic import ValidationError

    from mcp_team.llm.settings import ModelSettings

    try:
        settings = ModelSettings(model=model) if model else ModelSettings()
        return settings.model_copy(update=spec.model_overrides)
    except ValidationError:
        return None

"""Command-line flags shared by every operator, named as controller-runtime names them.

Every flag can also be set through an environment variable: ``OPSUITE_`` followed by the flag
name in upper snake case (``--leader-elect`` -> ``OPSUITE_LEADER_ELECT``). A flag given on the
command line wins over the environment. An operator declares its own flags, under the same rule,
with :func:`parse_operator_flags`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class ManagerOptions:
    """Parsed start-up options of one operator process."""

    leader_elect: bool
    leader_election_id: str
    leader_election_namespace: str | None
    metrics_bind_address: str
    health_probe_bind_address: str
    namespaces: tuple[str, ...]
    log_format: Literal["json", "text"]
    log_level: str
    max_concurrent_reconciles: int
    watch_timeout: float
    metrics_secure: bool = False
    metrics_cert_path: str = ""
    metrics_cert_name: str = "tls.crt"
    metrics_cert_key: str = "tls.key"

    @property
    def clusterwide(self) -> bool:
        """True when the operator serves all namespaces."""
        return not self.namespaces


def _env_name(flag: str) -> str:
    return "OPSUITE_" + flag.lstrip("-").replace("-", "_").upper()


def _bool(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def bool_flag(parser: argparse.ArgumentParser, flag: str, help: str | None = None) -> None:
    """Declare a switch, off by default: ``--flag`` or ``--flag=true`` turns it on, and
    ``--flag=false`` turns off what the environment turned on."""
    parser.add_argument(flag, type=_bool, nargs="?", const=True, default=False, help=help)


def _positive_int(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def _positive_float(value: str) -> float:
    number = float(value)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {number}")
    return number


def build_parser(operator: str, description: str) -> argparse.ArgumentParser:
    """The argument parser of an operator's console script."""
    parser = argparse.ArgumentParser(prog=operator, description=description)
    bool_flag(
        parser,
        "--leader-elect",
        "Elect a leader through a coordination.k8s.io Lease; only the leader reconciles "
        "(default false; the Helm chart turns it on).",
    )
    parser.add_argument(
        "--leader-election-id",
        default=f"{operator}.opsuite.dev",
        help="Name of the Lease used for leader election.",
    )
    parser.add_argument(
        "--leader-election-namespace",
        default=None,
        help="Namespace of the Lease (default: the pod's namespace, from POD_NAMESPACE or the "
        "service account).",
    )
    parser.add_argument(
        "--metrics-bind-address",
        default=":8080",
        help='Address of the Prometheus /metrics endpoint; "0" disables it.',
    )
    bool_flag(
        parser,
        "--metrics-secure",
        "Serve /metrics over HTTPS, each request authenticated (TokenReview) and authorized "
        "(SubjectAccessReview: get on the non-resource URL /metrics) by the API server "
        "(default false; the Helm chart and the OLM bundle turn it on).",
    )
    parser.add_argument(
        "--metrics-cert-path",
        default="",
        help="Directory of the metrics server's certificate and key (e.g. a mounted "
        "kubernetes.io/tls Secret); empty: a self-signed certificate made at start-up.",
    )
    parser.add_argument(
        "--metrics-cert-name",
        default="tls.crt",
        help="File name of the certificate (PEM, chain) in --metrics-cert-path.",
    )
    parser.add_argument(
        "--metrics-cert-key",
        default="tls.key",
        help="File name of the private key (PEM) in --metrics-cert-path.",
    )
    parser.add_argument(
        "--health-probe-bind-address",
        default=":8081",
        help='Address of /healthz and /readyz; "0" disables them.',
    )
    parser.add_argument(
        "--namespace",
        dest="namespaces",
        action="append",
        default=None,
        help="Serve only this namespace (repeatable); default: all namespaces.",
    )
    parser.add_argument("--log-format", choices=["json", "text"], default="json")
    parser.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        default="info",
    )
    parser.add_argument(
        "--max-concurrent-reconciles",
        type=_positive_int,
        default=4,
        help="Workers reconciling different objects at the same time.",
    )
    parser.add_argument(
        "--watch-timeout",
        type=_positive_float,
        default=60.0,
        help="Seconds after which the API server ends each watch (a bookmark comes before); a "
        "watch silent for twice as long makes /readyz fail, and one silent for 2 * (this + 25) "
        "s is dead: /healthz fails and the leader steps down (releases its Lease, exits 1).",
    )
    return parser


def parse_options(
    operator: str,
    description: str,
    argv: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> ManagerOptions:
    """Parse flags, with ``OPSUITE_*`` environment variables as defaults."""
    parser = build_parser(operator, description)
    _env_defaults(parser, os.environ if environ is None else environ)
    args = parser.parse_args(argv)
    return ManagerOptions(
        leader_elect=args.leader_elect,
        leader_election_id=args.leader_election_id,
        leader_election_namespace=args.leader_election_namespace,
        metrics_bind_address=args.metrics_bind_address,
        metrics_secure=args.metrics_secure,
        metrics_cert_path=args.metrics_cert_path,
        metrics_cert_name=args.metrics_cert_name,
        metrics_cert_key=args.metrics_cert_key,
        health_probe_bind_address=args.health_probe_bind_address,
        namespaces=tuple(sorted(set(args.namespaces or ()))),
        log_format=args.log_format,
        log_level=args.log_level,
        max_concurrent_reconciles=args.max_concurrent_reconciles,
        watch_timeout=args.watch_timeout,
    )


def parse_operator_flags(
    declare: Callable[[argparse.ArgumentParser], None],
    argv: Sequence[str],
    environ: Mapping[str, str] | None = None,
) -> tuple[argparse.Namespace, list[str]]:
    """(an operator's own flags, the rest of ``argv`` for :func:`parse_options`).

    ``declare`` adds the flags to a parser; each defaults to its ``OPSUITE_*`` variable as the
    common flags do, so an operator needs neither its own naming rule nor its own converters.
    """
    parser = argparse.ArgumentParser(add_help=False)
    declare(parser)
    _env_defaults(parser, os.environ if environ is None else environ)
    return parser.parse_known_args(list(argv))


def _env_defaults(parser: argparse.ArgumentParser, env: Mapping[str, str]) -> None:
    """Default each flag of ``parser`` to its variable in ``env``, converted and checked as the
    flag's value would be (``--namespace``'s: a comma- or space-separated list). Another
    repeatable flag reads no variable: its operator names and splits its own list variable."""
    defaults: dict[str, object] = {}
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        value = env.get(_env_name(action.option_strings[0]))
        if value is None:
            continue
        if action.dest == "namespaces":
            defaults["namespaces"] = [n for n in value.replace(",", " ").split() if n]
        elif not isinstance(action, argparse._AppendAction):
            convert = action.type if callable(action.type) else str
            try:
                defaults[action.dest] = convert(value)
            except (argparse.ArgumentTypeError, ValueError) as exc:
                parser.error(f"{_env_name(action.option_strings[0])}: {exc}")
            if action.choices is not None and defaults[action.dest] not in action.choices:
                parser.error(f"{_env_name(action.option_strings[0])}: not one of {action.choices}")
    parser.set_defaults(**defaults)

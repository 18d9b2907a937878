"""The parts of the Dockerfile and the workflows that repeat per operator, written from the list
of operators (:mod:`opsuite_packaging.operators`) by ``make manifests`` between two marker lines,
so that a new entry of the list gets its image stage and its build steps, and ``make verify``
fails on a block edited by hand."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from opsuite_packaging.operators import ROOT, Operator

BEGIN = "# BEGIN from operators/operators.toml (make manifests):"
END = "# END from operators/operators.toml"
RELEASE = ROOT / ".github" / "workflows" / "release.yaml"
BUILD_ACTION = "docker/build-push-action"


def pinned(action: str) -> str:
    """``action`` as release.yaml's images job pins it (``owner/repo@sha # version``): the e2e
    build steps use the same pin, so that moving it there (hack/workflow_actions.py) moves theirs
    and no second copy of it is kept here."""
    found = re.search(rf"uses: ({re.escape(action)}@[0-9a-f]{{40}} # \S+)", RELEASE.read_text())
    if found is None:
        raise ValueError(f"{RELEASE}: no pinned {action}")
    return found.group(1)


def with_block(text: str, name: str, lines: Sequence[str]) -> str:
    """``text`` with the block ``name`` holding ``lines`` (indented as its marker)."""
    begin = f"{BEGIN} {name}"
    head, found, rest = text.partition(begin)
    if not found:
        raise ValueError(f"no block {name!r}")
    indent = head[head.rfind("\n") + 1 :]
    _, found, tail = rest.partition(f"{indent}{END}")
    if not found:
        raise ValueError(f"block {name!r} has no end")
    body = "".join(f"{indent}{line}\n" if line else "\n" for line in lines)
    return f"{head}{begin}\n{body}{indent}{END}{tail}"


def _copies(operators: Sequence[Operator]) -> list[str]:
    return [
        f"COPY operators/{op.name}/{op.package} operators/{op.name}/{op.package}"
        for op in operators
    ]


def _stages(operators: Sequence[Operator]) -> list[str]:
    lines: list[str] = []
    for op in operators:
        lines += [
            *([""] if lines else []),
            f"FROM runtime AS {op.image}",
            f'LABEL org.opencontainers.image.title="{op.image}" \\',
            f'      org.opencontainers.image.description="{op.description}"',
            f'ENTRYPOINT ["/opt/venv/bin/{op.image}"]',
        ]
    return lines


def _build_steps(operators: Sequence[Operator]) -> list[str]:
    uses = pinned(BUILD_ACTION)
    lines: list[str] = []
    for op in operators:
        lines += [
            f"- name: Build {op.image}",
            f"  uses: {uses}",
            "  with:",
            "    context: .",
            f"    target: {op.image}",
            f"    tags: ${{{{ env.IMAGE_PREFIX }}}}/{op.image}:${{{{ env.IMAGE_TAG }}}}",
            "    load: true",
            "    provenance: false",
            "    sbom: false",
            f"    cache-from: type=gha,scope={op.image}",
            f"    cache-to: type=gha,mode=max,scope={op.image}",
        ]
    return lines


def _matrix(operators: Sequence[Operator]) -> list[str]:
    return [f"target: [{', '.join(op.image for op in operators)}]"]


BLOCKS: dict[str, dict[str, Callable[[Sequence[Operator]], list[str]]]] = {
    "Dockerfile": {"operator packages": _copies, "operator images": _stages},
    ".github/workflows/e2e.yaml": {"operator images": _build_steps},
    ".github/workflows/release.yaml": {"operator images": _matrix},
}
"""Per file (from the repository's root), its blocks."""


def rewritten(path: str, text: str, operators: Sequence[Operator]) -> str:
    """``text`` of the file ``path`` with each of its blocks written from ``operators``."""
    for name, lines in BLOCKS[path].items():
        text = with_block(text, name, lines(operators))
    return text

"""The list of operators, ``operators/operators.toml``: what every script, generator and
workflow reads instead of naming the operators itself.

Standard library only, so that shell scripts and workflow steps run it without the project's
virtualenv: ``python3 shared/opsuite_packaging/operators.py images`` prints the images (also
``names``, ``charts``, ``bundles``, ``crds``), space-separated; ``--json`` prints a JSON list.
"""

from __future__ import annotations

import json
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIST = ROOT / "operators" / "operators.toml"


@dataclass(frozen=True)
class Operator:
    """One entry of the list (its comments say what each field is)."""

    name: str
    image: str
    description: str
    crds: tuple[str, ...]
    added_field: str

    @property
    def package(self) -> str:
        """The runtime package, ``<name>_operator``."""
        return f"{self.name}_operator"

    @property
    def manifests(self) -> str:
        """The packaging spec module, ``<name>_manifests``."""
        return f"{self.name}_manifests"

    @property
    def directory(self) -> Path:
        """``operators/<name>``."""
        return ROOT / "operators" / self.name

    @property
    def chart(self) -> Path:
        """``charts/<image>``."""
        return ROOT / "charts" / self.image

    @property
    def bundle(self) -> str:
        """The OLM bundle's (and its image's) name."""
        return f"{self.image}-bundle"


def load(path: Path = LIST) -> tuple[Operator, ...]:
    """The operators ``path`` lists, in its order."""
    entries = tomllib.loads(path.read_text())["operator"]
    return tuple(
        Operator(
            name=entry["name"],
            image=entry["image"],
            description=entry["description"],
            crds=tuple(entry["crds"]),
            added_field=entry["added_field"],
        )
        for entry in entries
    )


OPERATORS = load()

FIELDS = {
    "names": lambda op: [op.name],
    "images": lambda op: [op.image],
    "charts": lambda op: [op.image],
    "bundles": lambda op: [op.bundle],
    "crds": lambda op: list(op.crds),
}


def main(argv: Sequence[str]) -> int:
    """Print one field of every operator (see the module docstring)."""
    args = [a for a in argv if a != "--json"]
    if len(args) != 1 or args[0] not in FIELDS:
        print(f"usage: operators.py {{{','.join(FIELDS)}}} [--json]", file=sys.stderr)
        return 2
    values = [value for op in OPERATORS for value in FIELDS[args[0]](op)]
    print(json.dumps(values) if "--json" in argv else " ".join(values))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

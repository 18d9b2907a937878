"""Tests for opsuite_packaging.descriptions: attribute docstrings as schema descriptions."""

from __future__ import annotations

from pydantic import Field

from opsuite_common.kube_model import KubeModel
from opsuite_packaging.descriptions import described_schema, field_description


class Inner(KubeModel):
    """An inner part."""

    port_name: str = "http"
    """The port's
    name, on two lines."""


class Sample(KubeModel):
    """A sample."""

    max_surge: int | str = 1
    """How many extra."""
    node_name: str | None = None
    inner: Inner | None = None
    """The inner part."""
    limits: str | None = Field(None, description="Given.")
    """Not this one."""
    count: int = 0

    def method(self) -> None:
        """Not a field's."""
        local: int = 1
        """Not a field's either."""
        del local


class Child(Sample):
    """Inherits the fields and their docstrings, and redeclares one without."""

    max_surge: int | str = 2
    extra: bool = False
    """A field of the child."""


def test_attribute_docstrings_become_descriptions() -> None:
    schema = described_schema(Sample)
    assert schema["description"] == "A sample."
    properties = schema["properties"]
    assert properties["maxSurge"]["description"] == "How many extra."
    assert "description" not in properties["nodeName"]
    assert properties["inner"]["description"] == "The inner part."
    assert properties["limits"]["description"] == "Given."
    assert "description" not in properties["count"]


def test_nested_models_and_cleaned_docstrings() -> None:
    inner = described_schema(Sample)["$defs"]["Inner"]["properties"]["portName"]
    assert inner["description"] == "The port's\nname, on two lines."


def test_inherited_docstrings_and_redeclared_fields() -> None:
    properties = described_schema(Child)["properties"]
    assert properties["inner"]["description"] == "The inner part."
    assert properties["extra"]["description"] == "A field of the child."
    assert "description" not in properties["maxSurge"]  # as pydantic's own reading


def test_field_description() -> None:
    assert field_description(Sample, "max_surge") == "How many extra."
    assert field_description(Sample, "limits") == "Given."
    assert field_description(Sample, "node_name") is None

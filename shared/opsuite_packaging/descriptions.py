"""The models' attribute docstrings as the descriptions of the generated schemas (CRDs, chart
values), read from the source when a schema is made.

pydantic's ``use_attribute_docstrings`` would read and parse every model's source when its class
is created, in every process that imports a model, at each operator's start, for descriptions
that only the generated files show. So they are read here, with the rules of
pydantic's own reading: a string right after an annotated attribute of the class body, cleaned
as a docstring; a description given with ``Field(description=...)`` wins.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
from functools import cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema


def _own_docstrings(cls: type) -> dict[str, str]:
    """The docstrings of the attributes annotated in ``cls``'s own body."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # no source (an interactive session): no descriptions
        return {}
    body = next(s for s in ast.parse(source).body if isinstance(s, ast.ClassDef)).body
    docs: dict[str, str] = {}
    for statement, following in itertools.pairwise(body):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[statement.target.id] = inspect.cleandoc(following.value.value)
    return docs


@cache
def field_docstrings(model: type[BaseModel]) -> dict[str, str]:
    """Each field's docstring, by field name: its own class's, or an ancestor's it inherits."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if issubclass(cls, BaseModel) and cls is not BaseModel:
            own = _own_docstrings(cls)
            for name in inspect.get_annotations(cls):
                docs.pop(name, None)
            docs.update(own)
    return {name: doc for name, doc in docs.items() if name in model.model_fields}


def field_description(model: type[BaseModel], name: str) -> str | None:
    """The description of ``model``'s field ``name``: given with ``Field``, or its docstring."""
    return model.model_fields[name].description or field_docstrings(model).get(name)


class DescribedSchema(GenerateJsonSchema):
    """pydantic's JSON schema with each field's docstring as its description, unless it has one."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        json_schema = super().model_schema(schema)
        model: type[BaseModel] = schema["cls"]
        properties: dict[str, Any] = json_schema.get("properties", {})
        for name, doc in field_docstrings(model).items():
            field = model.model_fields[name]
            key = field.alias if self.by_alias and field.alias else name
            if key in properties and field.description is None:
                properties[key] = {**properties[key], "description": doc}
        return json_schema


def described_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema (by alias, for validation), its fields described."""
    return model.model_json_schema(by_alias=True, schema_generator=DescribedSchema)

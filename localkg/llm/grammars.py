"""GBNF grammars that make a small model's structured answers impossible to misparse.

llama.cpp's grammar sampler only lets the model emit tokens that keep the
output a prefix of the grammar's language, and once the grammar is complete
only end-of-generation is allowed. That guarantees a parseable answer *if the
output can finish within its token budget* — so every grammar here has a
bounded language, and its worst-case length is computed so the budget can
cover it:

* a choice is one to ``k`` option numbers (``"2, 5"``) or ``"none"``;
* a JSON object follows a schema in which every string has a ``maxLength``
  and every array a ``maxItems``. Bounds the caller set are honoured (the
  budget grows to fit them); missing ones are filled in and halved until the
  worst case fits the caller's ``max_tokens``.

A generated token always decodes to at least one byte (llama.cpp's grammar
sampler rejects empty pieces), so the worst case in bytes bounds the tokens.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from localkg.errors import UnsupportedSchemaError

#: Bounds given to strings and arrays that the schema leaves open, before halving to fit the budget.
DEFAULT_MAX_LENGTH = 64
DEFAULT_MAX_ITEMS = 8

# llama.cpp's converter lets a JSON string character be a \uXXXX escape (6 bytes); a model never
# needs one (raw UTF-8 is valid JSON), and dropping it makes every character at most 4 bytes.
_CHAR_RULE = r'char ::= [^"\\\x7F\x00-\x1F] | "\\" ["\\/bfnrt]'
_CHAR_BYTES = 4
_SPACE = 1  # the converter's optional single space after every value
_NUMBER_BYTES = 52  # "-" 16 digits "." 16 digits "e+" 16 digits (the converter caps each part at 16)
_INTEGER_BYTES = 17
_FORMAT_BYTES = {"date": 12, "time": 20, "date-time": 31, "uuid": 38}  # quoted
_IGNORED_KEYS = {"title", "description", "default", "examples", "$schema", "$id", "$comment"}


# ------------------------------------------------------------------------------------------- choices
def choice_grammar(n: int, k: int = 1, allow_none: bool = False) -> str:
    """Up to ``k`` option numbers from 1..n separated by ", ", or "none" when allowed.

    Distinctness is not expressible compactly in GBNF; callers drop repeats.
    """
    if n < 1 or k < 1:
        raise ValueError("a choice needs at least one option and k >= 1")
    picks = " | ".join(f'"{number}"' for number in range(1, n + 1))
    answer = "pick" if k == 1 else f'pick (", " pick){{0,{k - 1}}}'
    if allow_none:
        answer = f'"none" | {answer}'
    return f'root ::= " "? ({answer})\npick ::= {picks}\n'


def choice_max_bytes(n: int, k: int = 1, allow_none: bool = False) -> int:
    """The longest text :func:`choice_grammar` accepts, in bytes."""
    k = min(k, n)
    longest = k * len(str(n)) + (k - 1) * 2
    return 1 + max(longest, 4 if allow_none else 0)


def parse_choice(text: str, n: int, k: int) -> list[int]:
    """Zero-based option indices from a grammar-constrained answer, repeats dropped, at most ``k``."""
    text = text.strip()
    if text == "none" or not text:
        return []
    picks: list[int] = []
    for part in text.split(","):
        index = int(part.strip()) - 1
        if 0 <= index < n and index not in picks:
            picks.append(index)
    return picks[:k]


# ---------------------------------------------------------------------------------------------- JSON
@dataclass(frozen=True)
class BoundedSchema:
    """A schema whose every output fits ``max_tokens``, and its grammar."""

    schema: dict[str, Any]
    max_tokens: int
    grammar: str


def bounded_json_grammar(schema: dict[str, Any], max_tokens: int) -> BoundedSchema:
    """Bound ``schema`` so its longest output fits ``max_tokens`` (or the caller's own bounds).

    Raises UnsupportedSchemaError for constructs whose length cannot be bounded
    (``$ref``, ``pattern``, open objects, arrays without ``items``).
    """
    bounded = _normalise(copy.deepcopy(schema), path="$")
    length, items = DEFAULT_MAX_LENGTH, DEFAULT_MAX_ITEMS
    while True:
        filled = _fill_defaults(copy.deepcopy(bounded), length, items)
        worst = _max_bytes(filled)
        if worst <= max_tokens or (length == 1 and items == 1):
            break
        length, items = max(1, length // 2), max(1, items // 2)
    grammar = _restrict_chars(_schema_to_gbnf(filled))
    return BoundedSchema(schema=filled, max_tokens=max(max_tokens, worst), grammar=grammar)


def _normalise(schema: Any, path: str) -> dict[str, Any]:
    """Check the schema is boundable; turn ``type: [a, b]`` into ``anyOf`` (the converter would
    otherwise drop the other keywords) and close objects."""
    if not isinstance(schema, dict):
        raise UnsupportedSchemaError(f"{path}: a schema must be an object, not {schema!r}")
    for key in ("$ref", "pattern", "prefixItems", "allOf", "not", "patternProperties"):
        if key in schema:
            raise UnsupportedSchemaError(f"{path}: {key!r} is not supported (its output length cannot be bounded)")
    if "const" in schema or "enum" in schema:
        return schema
    if isinstance(schema.get("type"), list):
        rest = {k: v for k, v in schema.items() if k != "type"}
        schema = {"anyOf": [{**rest, "type": t} for t in schema["type"]]}
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return {union: [_normalise(branch, f"{path}.{union}[{i}]") for i, branch in enumerate(schema[union])]}
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties")
        if not properties or schema.get("additionalProperties") not in (None, False):
            raise UnsupportedSchemaError(f"{path}: objects need 'properties' and no additionalProperties")
        schema["properties"] = {name: _normalise(sub, f"{path}.{name}") for name, sub in properties.items()}
        schema["additionalProperties"] = False
    elif kind == "array":
        if not isinstance(schema.get("items"), dict):
            raise UnsupportedSchemaError(f"{path}: arrays need one 'items' schema")
        schema["items"] = _normalise(schema["items"], f"{path}[]")
    elif kind == "string":
        fmt = schema.get("format")
        if fmt is not None and fmt not in _FORMAT_BYTES:
            raise UnsupportedSchemaError(f"{path}: string format {fmt!r} is not supported")
    elif kind not in ("integer", "number", "boolean", "null"):
        raise UnsupportedSchemaError(f"{path}: unsupported or missing type {kind!r}")
    return {k: v for k, v in schema.items() if k not in _IGNORED_KEYS}


def _fill_defaults(schema: dict[str, Any], length: int, items: int) -> dict[str, Any]:
    for union in ("anyOf", "oneOf"):
        if union in schema:
            schema[union] = [_fill_defaults(branch, length, items) for branch in schema[union]]
            return schema
    kind = schema.get("type")
    if kind == "object":
        schema["properties"] = {n: _fill_defaults(s, length, items) for n, s in schema["properties"].items()}
    elif kind == "array":
        schema["items"] = _fill_defaults(schema["items"], length, items)
        schema.setdefault("maxItems", max(items, schema.get("minItems", 0)))
    elif kind == "string" and "format" not in schema and "enum" not in schema and "const" not in schema:
        schema.setdefault("maxLength", max(length, schema.get("minLength", 0)))
    return schema


def _max_bytes(schema: dict[str, Any]) -> int:
    """The longest JSON text the converter's grammar for ``schema`` accepts, in bytes."""
    if "const" in schema:
        return len(_json_text(schema["const"]).encode("utf-8")) + _SPACE
    if "enum" in schema:
        return max(len(_json_text(value).encode("utf-8")) for value in schema["enum"]) + _SPACE
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return max(_max_bytes(branch) for branch in schema[union])
    kind = schema["type"]
    if kind == "object":
        pairs = sum(len(json.dumps(name)) + 5 + _max_bytes(sub) for name, sub in schema["properties"].items())
        return 4 + pairs
    if kind == "array":
        return 4 + schema["maxItems"] * (_max_bytes(schema["items"]) + 2)
    if kind == "string":
        if "format" in schema:
            return _FORMAT_BYTES[schema["format"]] + _SPACE
        return 2 + schema["maxLength"] * _CHAR_BYTES + _SPACE
    return {"integer": _INTEGER_BYTES, "number": _NUMBER_BYTES, "boolean": 5, "null": 4}[kind] + _SPACE


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _schema_to_gbnf(schema: dict[str, Any]) -> str:
    """llama-cpp-python's JSON-schema converter, with literals escaped correctly.

    Its 0.3.x ``_format_literal`` escapes quotes and newlines but not backslashes, so a key or enum
    value whose JSON spelling holds ``\\"`` (a quote in a name, common in entity names) yields a
    broken grammar; and constants are written ASCII-escaped (``\\u00e9``), which a model rarely
    produces. The subclass fixes both; everything else is the converter's.
    """
    from llama_cpp.llama_grammar import SchemaConverter

    class Converter(SchemaConverter):
        def _format_literal(self, literal: str) -> str:
            escaped = literal.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
            return f'"{escaped}"'

        def _generate_constant_rule(self, value: Any) -> str:
            return self._format_literal(_json_text(value))

    converter = Converter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    converter.visit(converter.resolve_refs(schema, "schema"), "")
    return converter.format_grammar()


def _restrict_chars(grammar: str) -> str:
    lines = [(_CHAR_RULE if line.startswith("char ::=") else line) for line in grammar.splitlines()]
    return "\n".join(lines) + "\n"

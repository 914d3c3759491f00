"""The scenario file's reading layer: YAML that remembers lines, and field readers whose
errors name file, line and field (`ScenarioError`). scenario.py builds the scenario on them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.resources import Resources


class ScenarioError(ValueError):
    """Bad scenario input: `file:line: field: reason`."""

    def __init__(self, source: str, line: int | None, field: str, reason: str) -> None:
        self.source = source
        self.line = line
        self.field = field
        self.reason = reason
        where = f"{source}:{line}" if line is not None else source
        super().__init__(f"{where}: {field}: {reason}")


class Located(dict[str, Any]):
    """A mapping that remembers the line of each key (1-based)."""

    lines: dict[str, int]
    line: int


class Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: Loader, node: yaml.MappingNode) -> Located:
    loader.flatten_mapping(node)
    result = Located()
    result.lines = {}
    result.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, str):
            raise ScenarioError(
                loader.name, key_node.start_mark.line + 1, str(key), "keys must be strings"
            )
        if key in result:
            raise ScenarioError(loader.name, key_node.start_mark.line + 1, key, "duplicate key")
        result[key] = loader.construct_object(value_node, deep=True)
        result.lines[key] = key_node.start_mark.line + 1
    return result


Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def line_of(obj: object, key: str | None = None) -> int | None:
    if isinstance(obj, Located):
        return obj.lines.get(key, obj.line) if key is not None else obj.line
    return None


def str_map(source: str, obj: Mapping[str, Any], key: str, where: str) -> dict[str, str]:
    raw = obj.get(key) or {}
    if not isinstance(raw, Mapping):
        raise ScenarioError(source, line_of(obj, key), f"{where}.{key}", "must be a map")
    out: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(v, str):
            raise ScenarioError(
                source, line_of(raw, k), f"{where}.{key}.{k}", "values must be strings"
            )
        out[k] = v
    return out


def int_field(
    source: str, obj: Mapping[str, Any], key: str, where: str, default: int | None
) -> int | None:
    value = obj.get(key, default)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ScenarioError(
            source, line_of(obj, key), f"{where}.{key}", f"must be an integer >= 0, got {value!r}"
        )
    return value


def resources_field(source: str, obj: Mapping[str, Any], key: str, where: str) -> Resources:
    try:
        return Resources.parse(obj.get(key), f"{where}.{key}")
    except InvalidQuantityError as exc:
        line = line_of(obj.get(key), exc.field.rsplit(".", 1)[-1]) or line_of(obj, key)
        raise ScenarioError(source, line, exc.field, f"{exc.value!r}: {exc.reason}") from exc


def name_field(source: str, obj: Mapping[str, Any], where: str) -> str:
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise ScenarioError(
            source, line_of(obj, "name"), f"{where}.name", "must be a non-empty string"
        )
    return name


def check_keys(source: str, obj: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in obj:
        if key not in allowed:
            raise ScenarioError(
                source,
                line_of(obj, key),
                f"{where}.{key}",
                f"unknown field (expected one of: {', '.join(sorted(allowed))})",
            )


def list_field(source: str, doc: Mapping[str, Any], key: str) -> list[Any]:
    raw = doc.get(key) or []
    if not isinstance(raw, list):
        raise ScenarioError(source, line_of(doc, key), key, "must be a list")
    return raw


def maps_of(  # noqa: PLR0917 - the reader's usual arguments, and where doc is
    source: str, doc: Mapping[str, Any], key: str, raw: list[Any], allowed: set[str],
    within: str = "",
) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Each entry of the list `doc[key]` as (its path, the map), checked one at a time;
    `within`: the path of `doc` itself (a unit's list: `units[0]`), so errors name it all."""
    for i, item in enumerate(raw):
        where = f"{within}.{key}[{i}]" if within else f"{key}[{i}]"
        if not isinstance(item, Mapping):
            raise ScenarioError(source, line_of(doc, key), where, "must be a map")
        check_keys(source, item, allowed, where)
        yield where, item


def plain(value: Any) -> Any:
    """YAML's located maps as plain dicts and lists (what the integrations and the domain's
    parsers read)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value

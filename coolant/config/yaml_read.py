"""YAML text to plain data, as `yaml.safe_load` gives it, in time and memory linear in the file.

PyYAML's C loader (libyaml, in PyYAML's wheels) parses in C but composes a node for every scalar, map and list,
then runs its Python constructor over that tree: at 10,000 deployments that is seconds and tens of MB, and the
garbage collector walks the growing tree again and again. A LiteLLM config is plain maps, lists and scalars, so
`load_yaml` builds the data straight from libyaml's events, resolving each plain scalar's type with PyYAML's own
resolver and constructors (the same ints, floats, bools, nulls and timestamps). Anything else (an anchor, an
alias, an explicit tag, a merge key, a key that is not a scalar, several documents, a syntax error) is handed
to `yaml.load` with the same safe loader, which gives its own result or error; so does a PyYAML built without
libyaml. The result is always what `yaml.load(text, Loader=CSafeLoader or SafeLoader)` gives.
"""

from __future__ import annotations

import gc
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

__all__ = ["load_yaml", "safe_loader"]

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"


class _Unusual(Exception):
    """The document uses something `load_yaml` leaves to PyYAML's own loader."""


def safe_loader() -> type[yaml.SafeLoader]:
    """libyaml's safe loader when PyYAML was built with it, else the pure-Python one."""
    loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    return loader


def load_yaml(text: str) -> Any:
    """`yaml.load(text, Loader=safe_loader())`, faster for plain documents; raises what it raises."""
    loader = safe_loader()
    enabled = gc.isenabled()
    gc.disable()  # the data is a tree of new containers: no cycles to find while it grows
    try:
        if loader is not yaml.SafeLoader:
            try:
                return _from_events(loader(text))
            except (_Unusual, yaml.YAMLError):
                pass  # redone below, for PyYAML's own result or error message
        return yaml.load(text, Loader=loader)
    finally:
        if enabled:
            gc.enable()


def _from_events(loader: Any) -> Any:
    """The single document of a plain YAML stream, built from the parser's events."""
    try:
        get = loader.get_event
        if type(get()) is not StreamStartEvent:
            raise _Unusual
        event = get()
        if type(event) is StreamEndEvent:
            return None  # an empty stream, as yaml.load gives it
        if type(event) is not DocumentStartEvent:
            raise _Unusual
        data = _document(loader, get)
        if type(get()) is not DocumentEndEvent or type(get()) is not StreamEndEvent:
            raise _Unusual  # several documents: yaml.load refuses them
        return data
    finally:
        loader.dispose()


def _document(loader: Any, get: Any) -> Any:
    resolve = loader.resolve
    constructors = loader.yaml_constructors
    tags: dict[tuple[str, tuple[bool, bool]], str] = {}  # the resolver depends on nothing else (no path resolvers)
    if loader.yaml_path_resolvers:
        raise _Unusual
    root: list[Any] = []
    stack: list[Any] = [root]  # open containers; a dict's pending key sits above it as a one-item list
    while True:
        event = get()
        kind = type(event)
        if kind is ScalarEvent:
            if event.anchor is not None:
                raise _Unusual
            tag = event.tag
            value: Any = event.value
            if tag is None or tag == "!":
                key = (value, event.implicit)
                tag = tags.get(key)
                if tag is None:
                    tag = tags[key] = resolve(ScalarNode, value, event.implicit)
            elif tag != _STR:
                raise _Unusual  # an explicit tag: PyYAML says what it makes of it
            if tag != _STR:
                if tag == _MERGE or tag not in constructors:
                    raise _Unusual
                value = constructors[tag](loader, ScalarNode(tag, value, style=event.style))
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            if event.anchor is not None:
                raise _Unusual
            node = MappingNode if kind is MappingStartEvent else SequenceNode
            tag = event.tag
            if tag is None or tag == "!":
                tag = resolve(node, None, event.implicit)
            if tag != (_MAP if node is MappingNode else _SEQ):
                raise _Unusual
            top = stack[-1]
            if type(top) is dict:
                raise _Unusual  # a map or list as a key
            stack.append({} if node is MappingNode else [])
            continue
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            value = stack.pop()
        elif kind is AliasEvent:
            raise _Unusual
        else:
            raise _Unusual
        top = stack[-1]
        if type(top) is list:
            if len(stack) > 1 and type(stack[-2]) is dict:  # the value of a pending key
                key_box = stack.pop()
                stack[-1][key_box[0]] = value
            elif top is root:
                return value
            else:
                top.append(value)
        else:  # a dict: value is its next key
            try:
                hash(value)
            except TypeError:
                raise _Unusual from None
            stack.append([value])

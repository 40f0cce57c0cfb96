"""The text of an API page for readers of the Markdown file itself, read from the sources.

The site renders an API page's ``::: module`` directive with mkdocstrings; a code host shows
the file as it is. This renders the same directive as plain Markdown, from the same reading
of the sources: griffe (what mkdocstrings uses), with the handler's paths, extensions,
docstring style and filters from ``mkdocs.yml``, and the directive's own ``members:`` and
``filters:``. For each listed name, in that order: a heading, its signature, its docstring;
for a class, its members (those the filters keep, a base's of these packages first, in
source order)
with their signatures and the first paragraph of their docstrings.

Static, so the text is the same on every machine and Python: annotations and defaults are
the source's expressions (griffe's reading of them), never an object's ``repr``, and nothing
is imported (``agent_channel_ray`` renders without Ray, ``agent_channel_react`` without
``openai``).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import griffe
import yaml

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 88
"""A signature longer than this is written one parameter a line (as black and ruff would)."""

_DIRECTIVE = re.compile(r"\A::: (?P<module>[\w.]+)[ \t]*\n(?P<options>(?:[ \t]+.*\n?|\n)*)\Z")


def _handler() -> dict[str, Any]:
    """The python handler's configuration in ``mkdocs.yml`` (paths, options)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    for plugin in config["plugins"]:
        if isinstance(plugin, dict) and "mkdocstrings" in plugin:
            return plugin["mkdocstrings"]["handlers"]["python"]
    raise LookupError("mkdocs.yml: no mkdocstrings python handler")


def parse(directive: str) -> tuple[str, dict[str, Any]]:
    """The module a ``::: module`` directive names, and its options over the handler's."""
    m = _DIRECTIVE.match(directive.strip("\n") + "\n")
    if m is None:
        raise ValueError(f"not a '::: module' directive with indented options:\n{directive}")
    options = dict(_handler().get("options", {}))
    given = yaml.safe_load(m.group("options")) or {}
    options.update(given.get("options", {}))
    return m.group("module"), options


@functools.cache
def _module(name: str) -> griffe.Module:
    handler = _handler()
    options = handler.get("options", {})
    extensions = [
        str(ROOT / e) if isinstance(e, str) and e.endswith(".py") else e
        for e in options.get("extensions", [])
    ]
    loader = griffe.GriffeLoader(
        search_paths=[ROOT / p for p in handler.get("paths", [])],
        extensions=griffe.load_extensions(*extensions),
        docstring_parser=griffe.Parser(options.get("docstring_style", "google")),
    )
    module = loader.load(name)
    assert isinstance(module, griffe.Module)
    return module


def _keep(name: str, filters: list[str]) -> bool:
    """mkdocstrings-python's rule: the last filter that matches decides; ``!`` excludes."""
    keep = None
    kinds = set()
    for pattern in filters:
        exclude = pattern.startswith("!")
        kinds.add(exclude)
        if re.search(pattern[1:] if exclude else pattern, name):
            keep = not exclude
    return kinds != {False} if keep is None else keep


_KIND = griffe.ParameterKind
_STARS = {_KIND.var_positional: "*", _KIND.var_keyword: "**"}


def _parameters(fn: griffe.Function, *, drop_first: bool) -> list[str]:
    """Each parameter as the source writes it, with the ``/`` and ``*`` markers."""
    params = list(fn.parameters)[1 if drop_first else 0 :]
    out: list[str] = []
    for i, p in enumerate(params):
        before = params[i - 1].kind if i else None
        if p.kind is _KIND.keyword_only and before not in (
            _KIND.keyword_only,
            _KIND.var_positional,
        ):
            out.append("*")
        stars = _STARS.get(p.kind, "") if p.kind is not None else ""
        text = stars + p.name
        if p.annotation is not None:
            text += f": {p.annotation}"
        if p.default is not None and not stars:  # griffe gives *args () and **kwargs {}
            text += f" = {p.default}" if p.annotation is not None else f"={p.default}"
        out.append(text)
        after = params[i + 1].kind if i + 1 < len(params) else None
        if p.kind is _KIND.positional_only and after is not _KIND.positional_only:
            out.append("/")
    return out


def _is_method(fn: griffe.Function) -> bool:
    return fn.parent is not None and fn.parent.is_class and "staticmethod" not in fn.labels


def _signature(head: str, params: list[str], returns: object, *, wrap: bool) -> str:
    tail = f" -> {returns}" if returns is not None else ""
    line = f"{head}({', '.join(params)}){tail}"
    if not wrap or len(line) <= WIDTH or not params:
        return line
    body = "".join(f"    {p},\n" for p in params)
    return f"{head}(\n{body}){tail}"


def _def(fn: griffe.Function, *, name: str | None = None) -> str:
    keyword = "async def" if "async" in fn.labels else "def"
    params = _parameters(fn, drop_first=False)
    return _signature(f"{keyword} {name or fn.name}", params, fn.returns, wrap=True)


def _bases(cls: griffe.Class) -> str:
    return f"({', '.join(str(b) for b in cls.bases)})" if cls.bases else ""


def _attribute(attr: griffe.Attribute, name: str, *, module_level: bool) -> str:
    """``name: type = value``; a module's annotated name without its value (the type says
    what it is), an instance attribute without the expression that set it."""
    text = name
    if attr.annotation is not None:
        text += f": {attr.annotation}"
    shown = attr.annotation is None if module_level else "class-attribute" in attr.labels
    if attr.value is not None and shown:
        text += f" = {attr.value}"
    return text


def _docstring(obj: griffe.Object) -> str:
    """The docstring as Markdown: text as written, Google-style sections as short lists."""
    if obj.docstring is None:
        return ""
    parts: list[str] = []
    for section in obj.docstring.parsed:
        kind = section.kind.value
        if kind == "text":
            parts.append(section.value.strip())
        elif kind == "admonition":
            title = section.title or section.value.kind.capitalize()
            parts.append(f"**{title}:** {section.value.contents.strip()}")
        elif kind == "examples":
            for sub_kind, text in section.value:
                code = sub_kind.value == "examples"
                parts.append(f"```pycon\n{text.strip()}\n```" if code else text.strip())
        else:
            items = []
            for element in section.value:
                name = getattr(element, "name", "") or ""
                annotation = getattr(element, "annotation", None)
                head = f"`{name}`" if name else ""
                if annotation is not None:
                    head += f" (`{annotation}`)" if head else f"`{annotation}`"
                description = " ".join(element.description.split())
                items.append(f"- {head}: {description}" if head else f"- {description}")
            title = section.title or kind.replace("-", " ").capitalize()
            parts.append(f"**{title}:**\n\n" + "\n".join(items))
    return "\n\n".join(p for p in parts if p)


def _summary(obj: griffe.Object) -> str:
    """The docstring's first paragraph on one line."""
    if obj.docstring is None:
        return ""
    return " ".join(obj.docstring.value.strip().split("\n\n")[0].split())


def _member_line(obj: griffe.Object, name: str) -> str:
    labels = obj.labels
    if isinstance(obj, griffe.Function):
        params = _parameters(obj, drop_first=_is_method(obj))
        code = _signature(name, params, obj.returns, wrap=False)
        notes = [
            x for x in ("async", "classmethod", "staticmethod", "abstractmethod") if x in labels
        ]
    elif isinstance(obj, griffe.Attribute):
        code = _attribute(obj, name, module_level=False)
        notes = ["property"] if "property" in labels else []
    elif isinstance(obj, griffe.Class):
        code = f"class {name}{_bases(obj)}"
        notes = []
    else:
        code, notes = name, []
    line = f"- `{code}`" + "".join(f" *{n}*" for n in notes)
    summary = _summary(obj)
    return f"{line}: {summary}" if summary else line


def _members(cls: griffe.Class, filters: list[str]) -> list[str]:
    # inherited_members: a base's own (of these packages: ``AgentChannel``'s kernel), first
    package = cls.path.split(".")[0]
    own = [(1, n, m) for n, m in cls.members.items()]
    inherited = [
        (0, n, m.final_target)
        for n, m in cls.inherited_members.items()
        if m.target_path.split(".")[0] == package
    ]
    kept = [
        (rank, name, member)
        for rank, name, member in own + inherited
        if name != "__init__" and isinstance(member, griffe.Object) and _keep(name, filters)
    ]
    kept.sort(key=lambda item: (item[0], item[2].lineno or 0))  # members_order: source
    return [_member_line(member, name) for _, name, member in kept]


def _entry(name: str, obj: griffe.Object, filters: list[str]) -> str:
    if isinstance(obj, griffe.Function):
        code = _def(obj, name=name)
    elif isinstance(obj, griffe.Class):
        code = f"class {name}{_bases(obj)}"
        init = obj.members.get("__init__")
        if isinstance(init, griffe.Function):  # declared, or made by @dataclass
            code += ":\n" + "\n".join(f"    {line}" for line in _def(init).splitlines())
    elif isinstance(obj, griffe.Attribute):
        code = _attribute(obj, name, module_level=True)
    else:
        code = name
    parts = [f"## `{name}`", f"```python\n{code}\n```"]
    doc = _docstring(obj)
    if (
        not doc
        and isinstance(obj, griffe.Class)
        and isinstance(init := obj.members.get("__init__"), griffe.Object)
    ):
        doc = _docstring(init)  # merge_init_into_class
    if doc:
        parts.append(doc)
    if isinstance(obj, griffe.Class) and (members := _members(obj, filters)):
        parts.append("**Members:**\n\n" + "\n".join(members))
    return "\n\n".join(parts) + "\n"


def reference(directive: str) -> str:
    """Markdown for a ``::: module`` directive: each of its ``members:`` in order."""
    module_name, options = parse(directive)
    members = options.get("members")
    if not isinstance(members, list) or not members:
        raise ValueError(f"::: {module_name}: list the page's names under 'members:'")
    module = _module(module_name)
    filters = options.get("filters", [])
    if not isinstance(filters, list):  # mkdocstrings' "public" is not read here
        raise ValueError(f"::: {module_name}: give 'filters:' as a list of patterns")
    entries = []
    for name in members:
        if name not in module.members:
            raise LookupError(f"::: {module_name}: no public name {name!r}")
        target = module.members[name]
        try:
            obj = target.final_target if isinstance(target, griffe.Alias) else target
        except griffe.AliasResolutionError as error:
            raise LookupError(f"::: {module_name}: {name} does not resolve ({error})") from error
        entries.append(_entry(name, obj, filters))
    return "\n".join(entries)

"""The definitions JavaScript and TypeScript make without a declaration, named as a user would type them.

CommonJS and prototype code defines most of its functions by assignment: `res.redirect = function redirect(url) {…}`,
`Router.prototype.route = function …`, `exports.parse = …`, `module.exports.serialize = …`,
`var self = module.exports = function …`; by object literal members (`propFn: function () {}`, `m() {}`) whose
object is owned by a variable, an assignment or `Object.assign(X.prototype, {...})`; and by
`Object.defineProperty(req, 'protocol', {get: …})` or a helper of the same shape (express's `defineGetter`). Each
becomes a `JsForm`: the name (`redirect`), its owner (`res`, `Router.prototype`: the qualified name is
`owner.name`), its kind and the nodes whose lines and body it covers. The tree-sitter walk in `code_parser.py` turns
them into symbols like any declared function.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

FUNCTION_VALUES = frozenset({"function_expression", "function", "arrow_function", "generator_function", "class"})
# calls that copy an object literal's members onto their first argument: the members belong to that argument
_MIXINS = frozenset({"Object.assign", "Object.defineProperties", "Object.create", "extend", "_.extend", "$.extend",
                     "merge", "mixin", "Object.setPrototypeOf"})
_DEFINE_PROPERTY = re.compile(r"(^|\.)define[A-Z]\w*$")  # Object.defineProperty, a module's own defineGetter
# a whole-module target: `module.exports = function …` is named by the function (or its variable), not by it
_MODULE_TARGETS = frozenset({"module.exports", "exports"})


@dataclass(frozen=True)
class JsForm:
    """One definition made by assignment, object literal or defineProperty."""

    name: str
    owner: str  # "res", "Router.prototype", "module.exports"; "" when the enclosing definition qualifies it
    kind: str  # function | method | class | property
    outer: Node  # the node whose lines the definition covers
    body: Node | None  # the elidable body (a function's block, a class body, a descriptor object)
    name_node: Node | None  # the node naming it (not a reference of the file)
    aliases: tuple[str, ...] = ()  # the chain's other member targets: `req.header` of `req.get = req.header = …`


def dotted(node: Node | None) -> str | None:
    """`a.b.c` for an identifier / `this` / member chain (`X["y"]` reads as `X.y`); None for anything computed."""
    if node is None:
        return None
    if node.type in ("identifier", "this", "property_identifier", "super"):
        return _text(node)
    if node.type == "member_expression":
        base, prop = dotted(node.child_by_field_name("object")), node.child_by_field_name("property")
        if not base or prop is None or prop.type == "private_property_identifier":
            return None
        return f"{base}.{_text(prop)}"
    if node.type == "subscript_expression":
        base, index = dotted(node.child_by_field_name("object")), node.child_by_field_name("index")
        key = _string(index)
        return f"{base}.{key}" if base and key else None
    return None


def js_form(node: Node) -> JsForm | None:
    """The definition a captured node makes, or None when it makes none (a chain's inner link, a value that is not a
    function, a descriptor's own members)."""
    if node.type == "assignment_expression":
        return _assignment(node)
    if node.type == "variable_declarator":
        return _declarator_chain(node)
    if node.type == "pair":
        return _pair(node)
    if node.type == "method_definition" and node.parent is not None and node.parent.type == "object":
        return _object_method(node)
    if node.type == "call_expression":
        return _define_property(node)
    return None


def _text(node: Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _string(node: Node | None) -> str:
    if node is None or node.type != "string":
        return ""
    return _text(node)[1:-1]


def _statement(node: Node) -> Node:
    parent = node.parent
    return parent if parent is not None and parent.type == "expression_statement" else node


def _chain(first_target: Node | None, value: Node | None) -> tuple[list[str | None], Node | None]:
    """The targets of `a = b.c = value` (each dotted, None when computed) and the value at the chain's end."""
    targets = [dotted(first_target)]
    while value is not None and value.type == "assignment_expression":
        targets.append(dotted(value.child_by_field_name("left")))
        value = value.child_by_field_name("right")
    return targets, value


def _named(targets: list[str | None], value: Node, outer: Node, name_nodes: list[Node | None]) -> JsForm | None:
    """Name a chain's value: its most specific member target (`res.redirect`), else the function's own name, else a
    plain variable (`var self = module.exports = function () …`), else `module.exports`."""
    kind = "class" if value.type == "class" else "function"
    body = value.child_by_field_name("body")
    members = [(t, n) for t, n in zip(targets, name_nodes) if t and "." in t and t not in _MODULE_TARGETS]
    if members:
        (target, name_node), others = members[0], tuple(dict.fromkeys(t for t, _ in members[1:] if t[:5] != "this."))
        owner, _, name = target.rpartition(".")
        return JsForm(name=name, owner=owner, kind="method" if kind == "function" else kind, outer=outer,
                      body=body, name_node=name_node, aliases=tuple(a for a in others if a != target))
    own = value.child_by_field_name("name")
    if own is not None:
        return JsForm(name=_text(own), owner="", kind=kind, outer=outer, body=body, name_node=None)
    for target, name_node in zip(targets, name_nodes):
        if target and target not in _MODULE_TARGETS:
            return JsForm(name=target, owner="", kind=kind, outer=outer, body=body, name_node=name_node)
    if any(t in _MODULE_TARGETS for t in targets):
        return JsForm(name="exports", owner="module", kind=kind, outer=outer, body=body, name_node=None)
    return None


def _name_node(target: Node | None) -> Node | None:
    if target is None:
        return None
    return target.child_by_field_name("property") or target.child_by_field_name("index") or target


def _links(node: Node) -> list[Node | None]:
    """The left sides of a chain starting at an assignment node."""
    lefts: list[Node | None] = []
    while node is not None and node.type == "assignment_expression":
        lefts.append(node.child_by_field_name("left"))
        node = node.child_by_field_name("right")
    return lefts


def _assignment(node: Node) -> JsForm | None:
    parent = node.parent
    if parent is not None and parent.type in ("assignment_expression", "variable_declarator"):
        return None  # an inner link of a chain: the chain's head names the value
    left = node.child_by_field_name("left")
    targets, value = _chain(left, node.child_by_field_name("right"))
    if value is None or value.type not in FUNCTION_VALUES:
        return None
    return _named(targets, value, _statement(node), [_name_node(n) for n in _links(node)])


def _declarator_chain(node: Node) -> JsForm | None:
    """`var self = module.exports = function …` (a declarator whose value is an assignment chain)."""
    value = node.child_by_field_name("value")
    if value is None or value.type != "assignment_expression":
        return None
    name = node.child_by_field_name("name")
    targets, end = _chain(name, value)
    if end is None or end.type not in FUNCTION_VALUES:
        return None
    outer = node.parent if node.parent is not None and node.parent.type.endswith("declaration") else node
    if outer.parent is not None and outer.parent.type == "export_statement":
        outer = outer.parent
    return _named(targets, end, outer, [name, *(_name_node(n) for n in _links(value))])


def _key(node: Node | None) -> str:
    if node is None:
        return ""
    if node.type in ("property_identifier", "identifier", "private_property_identifier", "number"):
        return _text(node)
    return _string(node)


def _pair(node: Node) -> JsForm | None:
    value = node.child_by_field_name("value")
    if value is None or value.type not in FUNCTION_VALUES or node.parent is None:
        return None
    key = node.child_by_field_name("key")
    name = _key(key)
    owner = _object_owner(node.parent)
    if not name or owner is None or _passed(node.parent):
        return None
    return JsForm(name=name, owner=owner, kind="class" if value.type == "class" else "method", outer=node,
                  body=value.child_by_field_name("body"), name_node=key)


def _object_method(node: Node) -> JsForm | None:
    name_node = node.child_by_field_name("name")
    name = _key(name_node)
    owner = _object_owner(node.parent) if node.parent is not None else None
    if not name or owner is None:
        return None
    return JsForm(name=name, owner=owner, kind="method", outer=node, body=node.child_by_field_name("body"),
                  name_node=name_node)


def _object_owner(obj: Node) -> str | None:
    """Who an object literal's members belong to: the variable or target it is assigned to, a mixin call's first
    argument, the key of the pair holding it; "" when nothing names it; None for a property descriptor (the
    defineProperty call is the definition)."""
    parent = obj.parent
    if parent is None:
        return ""
    if parent.type == "parenthesized_expression":
        return _object_owner(parent)
    if parent.type == "variable_declarator":
        return dotted(parent.child_by_field_name("name")) or ""
    if parent.type == "assignment_expression":
        return dotted(parent.child_by_field_name("left")) or ""
    if parent.type == "pair":
        above = _object_owner(parent.parent) if parent.parent is not None else ""
        key = _key(parent.child_by_field_name("key"))
        if above is None or not key:
            return None if above is None else ""
        return f"{above}.{key}" if above else key
    if parent.type == "arguments" and parent.parent is not None:
        function = dotted(parent.parent.child_by_field_name("function")) or ""
        if _DEFINE_PROPERTY.search(function):
            return None
        first = parent.named_children[0] if parent.named_children else None
        if function in _MIXINS and first is not None and first.id != obj.id:
            return dotted(first) or ""
    return ""


def _passed(obj: Node) -> bool:
    """An object literal handed to a call that is not a mixin (`res.format({html: function () …})`, options,
    handlers): its function-valued keys are arguments, not definitions a user would name."""
    parent = obj.parent
    while parent is not None and parent.type == "parenthesized_expression":
        parent = parent.parent
    if parent is None or parent.type != "arguments" or parent.parent is None:
        return False
    return (dotted(parent.parent.child_by_field_name("function")) or "") not in _MIXINS


def _define_property(node: Node) -> JsForm | None:
    """`Object.defineProperty(req, 'protocol', {get: function () …})` or a module's own helper,
    `defineGetter(req, 'protocol', function protocol() …)`: the property `req.protocol`."""
    if not _DEFINE_PROPERTY.search(dotted(node.child_by_field_name("function")) or ""):
        return None
    args = node.child_by_field_name("arguments")
    named = args.named_children if args is not None else []
    if len(named) < 3:
        return None
    target, key, descriptor = named[0], named[1], named[2]
    name = _string(key)
    if not name:
        return None
    body = descriptor if descriptor.type == "object" else descriptor.child_by_field_name("body")
    return JsForm(name=name, owner=dotted(target) or "", kind="property", outer=_statement(node), body=body,
                  name_node=None)

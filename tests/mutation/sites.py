"""Where each rule's check lives in hatp_mcp, found from the source, and the source with that check switched off.

A check site is found from the rule id it reports: a string constant that is exactly the id (`"HATP-TXN-2"`, or a
`"rule"` member's value), a name bound to one (`rule = "HATP-TXN-3"` in the function, `RULE = "HATP-JRN-13"` in the
module), an alias a module-level table gives it (`EXCLUSION_RULES = {"authority": "HATP-GW-4"}`; for the saga's
rule names, manual_sites.ALIASES), a lookup in such a table (`_HUMAN_RULES[exc.rule]` reports each of its ids), or a
call of a helper whose body ends returning an error carrying one (`def _not_payable(...): return HatpError(
"HATP-GATE-23", ...)`; public helpers count across modules). The id must be what the statement reports: one
compared against (`exc.rule == ...`), used as a key of a mapping or in an
`if`'s own test is a dispatch, not a check. Each such report makes one site:

- `if`: the nearest `if` whose body reports the id: its test becomes `False`, so the guard never fires;
- `else`: the nearest `if` whose `else` reports it: its test becomes `True`;
- `call`: a statement, under no `if`, that calls a check with the id (`_same("HATP-TXN-2", ...)`): it becomes `pass`;
- `except`: a `raise` in an exception handler whose `try` only calls checks (`try: check_party(...)`): the handler
  lets the call pass instead (`pass`);
- `tail`: a report at the end of a function under no `if` (`if len(finals) <= 1: return []` then `return [...]`):
  a `raise` becomes `return` in a function that returns nothing, a `return` returns what the function's other
  returns give when nothing is wrong (`[]`, `None`).

For a rule reported nowhere at all, weaker evidence: an `if` whose line carries a comment naming the id (`comment`), or
a guarded report whose message names it (`message`); the table shows the kind.

A report found nowhere of these (a value computed through a check, `kid = _verify(..., "HATP-TXN-2", ...)`, or a
`raise` in the handler of a `try` that computes a value the code goes on to use) is counted but never mutated: with
no value to go on with, switching it off is not defined. A check that reports no id (a timer's abort, a filter) may
be named in tests/mutation/manual_sites.py (`manual`: a condition and what it becomes with the check off).

The mutation is textual, at the AST node's own span, so the rest of the file (comments included) is unchanged.
Nothing here is imported by the package: it only rewrites a copy (tests/mutation/run.py).
"""

from __future__ import annotations

import ast
import dataclasses
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.mutation.manual_sites import ALIASES, MANUAL_SITES

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "hatp_mcp"
RULE = re.compile(r"HATP-[A-Z]+-\d+")

__all__ = ["Site", "Sites", "find_sites", "mutate"]


@dataclass(frozen=True, order=True)
class Site:
    """One place where a rule's check can be switched off: replace `text` at the span with `replacement`."""

    path: str  # relative to the repository root
    line: int
    col: int
    end_line: int
    end_col: int
    kind: str  # if | else | call | except | manual
    replacement: str

    def label(self) -> str:
        return f"{self.path}:{self.line} ({self.kind})"


@dataclass
class Sites:
    """Per rule: the sites to switch off, and the reports found that cannot be switched off (path:line)."""

    sites: dict[str, list[Site]]
    unmutable: dict[str, list[str]]


_FUNCTION = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
# An id under one of these is looked up, compared or keyed, not reported.
_NOT_A_REPORT = (ast.Compare, ast.Dict, ast.Set, ast.Subscript, ast.comprehension, ast.Match, ast.JoinedStr)


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    out: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            out[child] = node
    return out


@dataclass(frozen=True)
class _Module:
    """What a module's functions report through: helpers that build an error (`factories`), names for rule ids
    (`aliases`: `EXCLUSION_RULES = {"authority": "HATP-GW-4", ...}` or manual_sites.ALIASES) and module-level
    mappings whose values are rule ids (`maps`: `raise _refuse(_RULE_OF[exc.rule], ...)` reports any of them)."""

    factories: dict[str, set[str]]
    aliases: dict[str, str]
    maps: dict[str, set[str]]
    names: dict[str, set[str]]  # module-level `RULE = "HATP-JRN-13"`


def _rule_of(node: ast.expr, names: dict[str, set[str]], module: _Module) -> set[str]:
    """The rule ids `node` itself stands for (a constant, an alias, a bound local name, a factory's call)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if RULE.fullmatch(node.value):
            return {node.value}
        alias = module.aliases.get(node.value)
        return {alias} if alias else set()
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        return module.maps.get(node.value.id, set())
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        return names.get(node.id) or module.names.get(node.id, set())
    if isinstance(node, ast.Call):
        f = node.func
        fname = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
        if fname is not None:
            return module.factories.get(fname, set())
    return set()


def _function_of(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.AST | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, _FUNCTION):
            return node
    return None


def _own_nodes(func: ast.AST) -> Iterator[ast.AST]:
    """The nodes of `func`'s body, not those of functions or classes nested in it."""
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _FUNCTION):
            stack.extend(ast.iter_child_nodes(node))


def _local_names(func: ast.AST, maps: dict[str, set[str]]) -> dict[str, set[str]]:
    """`rule = "HATP-TXN-3"` (or `rule = _RULES.get(...)`, `_RULES[...]` of a module map) inside `func`, not in
    nested functions: the name stands for the id(s)."""
    out: dict[str, set[str]] = {}
    for node in _own_nodes(func):
        if not isinstance(node, ast.Assign):
            continue
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "get":
            value = ast.Subscript(value.func.value, ast.Constant(None), ast.Load())
        rules: set[str] = set()
        if _is_rule(value):
            assert isinstance(value, ast.Constant)
            rules = {value.value}
        elif isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
            rules = maps.get(value.value.id, set())
        for target in node.targets:
            if rules and isinstance(target, ast.Name):
                out.setdefault(target.id, set()).update(rules)
    return out


def _is_rule(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(RULE.fullmatch(node.value))


def _module_tables(tree: ast.Module) -> tuple[dict[str, str], dict[str, set[str]], dict[str, set[str]]]:
    """Module-level dict literals whose values are all rule ids: by their keys (aliases, when the keys are names)
    and by their own name (maps); and module-level names bound to a rule id (`RULE = "HATP-JRN-13"`)."""
    aliases: dict[str, str] = {}
    maps: dict[str, set[str]] = {}
    names = _local_names(tree, {})
    for node in tree.body:
        target, value = (
            (node.targets[0], node.value)
            if isinstance(node, ast.Assign) and len(node.targets) == 1
            else (node.target, node.value)
            if isinstance(node, ast.AnnAssign)
            else (None, None)
        )
        if not isinstance(target, ast.Name) or not isinstance(value, ast.Dict) or not value.values:
            continue
        if not all(_is_rule(v) for v in value.values):
            continue
        rules = {v.value for v in value.values if isinstance(v, ast.Constant)}
        maps[target.id] = rules
        for k, v in zip(value.keys, value.values, strict=True):
            if isinstance(k, ast.Constant) and isinstance(k.value, str) and not RULE.fullmatch(k.value):
                assert isinstance(v, ast.Constant)
                aliases[k.value] = v.value
    return aliases, maps, names


def _factories(tree: ast.Module, source: str, module: _Module) -> dict[str, set[str]]:
    """Functions (and methods) whose body ends, unconditionally, returning an error that carries a rule id (and
    does nothing else that reports): calling one reports that id."""
    out: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        last = node.body[-1]
        if not isinstance(last, ast.Return) or not isinstance(last.value, ast.Call):
            continue
        if _ok_return(node, source) is not None:
            continue  # a check that returns its refusal (`None` when all is well): its own return is the site
        # a helper that looks its rule up by a name its caller passes (`EXCLUSION_RULES[reason]`) is no factory:
        # each call's own alias (`_ex(who, "authority", ...)`) names the one rule it reports
        plain = _Module(module.factories, module.aliases, {}, module.names)
        names = _local_names(node, {})
        value = last.value
        rules = {r for arg in [*value.args, *(k.value for k in value.keywords)] for r in _rule_of(arg, names, plain)}
        if rules:
            out.setdefault(node.name, set()).update(rules)
    return out


def _statement_of(node: ast.AST, parents: dict[ast.AST, ast.AST], message: bool = False) -> ast.stmt | None:
    """The statement `node` is a report in, or None when something on the way looks it up instead."""
    child = node
    while child in parents:
        parent = parents[child]
        if isinstance(parent, ast.Dict):
            i = next((i for i, v in enumerate(parent.values) if v is child), None)
            key = parent.keys[i] if i is not None else None
            if not (isinstance(key, ast.Constant) and key.value == "rule"):
                return None
        elif isinstance(parent, ast.JoinedStr) and message:
            pass
        elif isinstance(parent, _NOT_A_REPORT) or isinstance(parent, _FUNCTION):
            return None
        if isinstance(parent, ast.If | ast.While) and child is parent.test:
            return None
        if isinstance(parent, ast.stmt):
            return parent
        child = parent
    return None


def _checks_only(try_: ast.Try | ast.TryStar, parents: dict[ast.AST, ast.AST]) -> bool:
    """A `try` body that computes nothing the code goes on to use: calls, ifs of calls, and names bound only for
    the body's own use (`raw = decode(sig); check_signature(raw)`)."""
    bound: set[str] = set()

    def simple(body: list[ast.stmt]) -> bool:
        for s in body:
            if isinstance(s, ast.If):
                if not (simple(s.body) and simple(s.orelse)):
                    return False
            elif isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) for t in s.targets):
                bound.update(t.id for t in s.targets if isinstance(t, ast.Name))
            elif not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call | ast.Await)):
                return False
        return True

    if not simple(try_.body):
        return False
    func = _function_of(try_, parents)
    inside = {id(n) for s in try_.body for n in ast.walk(s)}
    used_after = {
        n.id
        for n in (_own_nodes(func) if func is not None else ())
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and id(n) not in inside
    }
    return not (bound & used_after)


def _span(rel: str, node: ast.expr | ast.stmt, kind: str, replacement: str) -> Site:
    return Site(rel, node.lineno, node.col_offset, node.end_lineno or 0, node.end_col_offset or 0, kind, replacement)


_OK_VALUES = ("[]", "None", "()", "{}")


def _ok_return(func: ast.AST, source: str) -> str | None:
    """The value `func` returns when nothing is wrong, read from its other returns (`return []`, `return`)."""
    found: set[str] = set()
    for node in _own_nodes(func):
        if isinstance(node, ast.Return):
            text = "None" if node.value is None else ast.get_source_segment(source, node.value) or ""
            if text in _OK_VALUES:
                found.add(text)
    return found.pop() if len(found) == 1 else None


def _returns_nothing(func: ast.AST) -> bool:
    return not any(
        isinstance(n, ast.Return)
        and n.value is not None
        and not (isinstance(n.value, ast.Constant) and n.value.value is None)
        for n in _own_nodes(func)
    )


def _site_for(stmt: ast.stmt, rel: str, parents: dict[ast.AST, ast.AST], source: str) -> Site | None:
    """The guard that makes `stmt` happen, as a site; None when there is none that can be switched off."""
    child: ast.AST = stmt
    while child in parents:
        parent = parents[child]
        if isinstance(parent, _FUNCTION):
            return _tail_site(stmt, parent, rel, source) if child is stmt else None
        if isinstance(parent, ast.If):
            in_body = child in parent.body
            return _span(rel, parent.test, "if" if in_body else "else", "False" if in_body else "True")
        if isinstance(parent, ast.ExceptHandler):
            try_ = parents[parent]
            assert isinstance(try_, ast.Try | ast.TryStar)
            if isinstance(stmt, ast.Raise) and child is stmt and _checks_only(try_, parents):
                return _span(rel, stmt, "except", "pass")
            return None
        if isinstance(parent, ast.Try | ast.TryStar) and child in parent.finalbody:
            return None
        child = parent
    return None


def _tail_site(stmt: ast.stmt, func: ast.AST, rel: str, source: str) -> Site | None:
    """A report at the top level of a function body, under no `if`: a checking call becomes `pass`, a final
    `raise` in a function that returns nothing becomes `return`, a `return` of violations returns what the
    function returns when nothing is wrong."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call | ast.Await):
        return _span(rel, stmt, "call", "pass")
    if isinstance(stmt, ast.Raise) and _returns_nothing(func):
        return _span(rel, stmt, "tail", "return")
    if isinstance(stmt, ast.Return) and stmt.value is not None:
        ok = _ok_return(func, source)
        if ok is not None:
            return _span(rel, stmt.value, "tail", ok)
    return None


@dataclass
class _Parsed:
    rel: str
    source: str
    tree: ast.Module
    parents: dict[ast.AST, ast.AST]
    aliases: dict[str, str]
    maps: dict[str, set[str]]
    names: dict[str, set[str]]

    def module(self, factories: dict[str, set[str]]) -> _Module:
        return _Module(factories, self.aliases, self.maps, self.names)


def _parse_all(root: Path) -> list[_Parsed]:
    out = []
    for path in sorted((root / PACKAGE).rglob("*.py")):
        rel = str(path.relative_to(root))
        source = path.read_text()
        tree = ast.parse(source, filename=rel)
        aliases, maps, names = _module_tables(tree)
        aliases.update(ALIASES.get(rel, {}))
        out.append(_Parsed(rel, source, tree, _parents(tree), aliases, maps, names))
    return out


def _reports(m: _Parsed, module: _Module) -> Iterator[tuple[str, Site | None, int]]:
    """(rule, its site or None, line) for every report of a rule id in the module's functions."""
    names_of: dict[ast.AST, dict[str, set[str]]] = {}
    for node in ast.walk(m.tree):
        if not isinstance(node, ast.Constant | ast.Name | ast.Call | ast.Subscript):
            continue
        func = _function_of(node, m.parents)
        if func is None:
            continue  # a module-level table or constant: its checks are found where they report
        if func not in names_of:
            names_of[func] = _local_names(func, module.maps)
        rules = _rule_of(node, names_of[func], module)
        if not rules:
            continue
        stmt = _statement_of(node, m.parents)
        if stmt is None or (isinstance(stmt, ast.Assign) and stmt.value is node and isinstance(node, ast.Constant)):
            continue  # looked up, or `rule = "HATP-..."` (its uses are the reports)
        if (
            isinstance(stmt, ast.Return)
            and stmt is getattr(func, "body", [None])[-1]
            and node in _args(stmt.value)
            and _ok_return(func, m.source) is None
        ):
            continue  # a factory's own return: its callers report
        site = _site_for(stmt, m.rel, m.parents, m.source)
        for rule in rules:
            yield rule, site, stmt.lineno


def _args(call: ast.expr | None) -> list[ast.expr]:
    if not isinstance(call, ast.Call):
        return []
    return [*call.args, *(k.value for k in call.keywords)]


def _fallbacks(m: _Parsed) -> Iterator[tuple[str, Site]]:
    """Weaker evidence of where a rule is checked: an `if` whose line carries a comment naming the rule, and a
    guarded report whose message names it (`"... (HATP-MODE-3)"`)."""
    comments: dict[int, set[str]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(m.source).readline):
        if tok.type == tokenize.COMMENT:
            comments.setdefault(tok.start[0], set()).update(RULE.findall(tok.string))
    for node in ast.walk(m.tree):
        if isinstance(node, ast.If):
            for rule in comments.get(node.lineno, set()) | comments.get(node.test.end_lineno or 0, set()):
                yield rule, _span(m.rel, node.test, "comment", "False")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and not RULE.fullmatch(node.value):
            rules = RULE.findall(node.value)
            if not rules or _function_of(node, m.parents) is None:
                continue
            stmt = _statement_of(node, m.parents, message=True)
            if stmt is None or isinstance(m.parents.get(node), ast.Expr):
                continue  # a docstring
            site = _site_for(stmt, m.rel, m.parents, m.source)
            if site is not None and site.kind in ("if", "else"):
                for rule in rules:
                    yield rule, dataclasses.replace(site, kind="message")


def find_sites(root: Path = ROOT, manual: dict[str, list[tuple[str, str, str]]] = MANUAL_SITES) -> Sites:
    """Every rule's sites in `root`/hatp_mcp: its reports and its `manual` sites; for a rule with neither, the
    fallbacks (an `if` commented with the id, a guarded report whose message names it)."""
    parsed = _parse_all(root)
    public: dict[str, set[str]] = {}
    for m in parsed:
        for name, rules in _factories(m.tree, m.source, m.module({})).items():
            if not name.startswith("_"):
                public.setdefault(name, set()).update(rules)
    sites: dict[str, set[Site]] = {}
    unmutable: dict[str, set[str]] = {}
    weak: dict[str, set[Site]] = {}
    for m in parsed:
        own = _factories(m.tree, m.source, m.module({}))
        module = m.module({**public, **own})
        for rule, site, line in _reports(m, module):
            if site is None:
                unmutable.setdefault(rule, set()).add(f"{m.rel}:{line}")
            else:
                sites.setdefault(rule, set()).add(site)
        for rule, site in _fallbacks(m):
            weak.setdefault(rule, set()).add(site)
    for rule, named in manual.items():
        sites.setdefault(rule, set()).update(_manual_site(root, rel, needle, off) for rel, needle, off in named)
    for rule, found in weak.items():
        if rule not in sites and rule not in unmutable:  # a rule reported where it cannot be switched off stays so
            sites[rule] = found
    return Sites(
        {r: _outermost(sorted(s)) for r, s in sites.items()},
        {r: sorted(u) for r, u in unmutable.items()},
    )


def _manual_site(root: Path, rel: str, needle: str, off: str) -> Site:
    """The condition (an `if`'s test, or a part of one) whose source is `needle` in `rel` (exactly one; whitespace
    does not count), as a site where it becomes `off`."""
    source = (root / rel).read_text()
    found = [
        sub
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.If)
        for sub in ast.walk(node.test)
        if _squeezed(ast.get_source_segment(source, sub) or "") == _squeezed(needle)
    ]
    if len(found) != 1:
        raise LookupError(f"tests/mutation/manual_sites.py: {rel}: {len(found)} conditions read {needle!r}, not one")
    return _span(rel, found[0], "manual", off)


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _outermost(sites: list[Site]) -> list[Site]:
    """Drop a site inside the span of another one (it would be rewritten twice)."""
    out: list[Site] = []
    for s in sites:
        inside = any(
            o is not s
            and o.path == s.path
            and (o.line, o.col) <= (s.line, s.col)
            and (s.end_line, s.end_col) <= (o.end_line, o.end_col)
            and (o.line, o.col, o.end_line, o.end_col) != (s.line, s.col, s.end_line, s.end_col)
            for o in sites
        )
        if not inside:
            out.append(s)
    return out


def mutate(source: str, sites: list[Site]) -> str:
    """`source` with each site's span replaced (the sites are of this one file)."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(line: int, col: int) -> int:
        # ast columns are UTF-8 byte offsets
        text = lines[line - 1]
        return starts[line - 1] + len(text.encode()[:col].decode())

    out = source
    for s in sorted(sites, key=lambda s: (s.line, s.col), reverse=True):
        a, b = offset(s.line, s.col), offset(s.end_line, s.end_col)
        out = out[:a] + s.replacement + out[b:]
    return out

"""The structural promises of docs/ARCHITECTURE.md, checked by walking the source with `ast`.

Each check names the offending module and line, so a failure says what to move.
"""

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("knowledge", "memory", "curation")
MAX_LINES = 600


def _modules(root=ROOT):
    for app in APPS:
        for path in sorted((root / app).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if "/migrations/" in rel:
                continue
            yield rel, path


def _module_name(rel):
    parts = rel[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(rel): (rel, path) for rel, path in _modules()}


def _tree(path):
    return _parsed(path.read_text(), str(path))


@functools.cache  # several checks read every module: each text is parsed once a run
def _parsed(source, filename):
    return ast.parse(source, filename=filename)


def _is_type_checking(node):
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_lines(name, rel, tree, known):
    """(module, line) for every module in `known` this module imports, at any depth (function
    bodies too), TYPE_CHECKING blocks left out."""
    package = name if rel.endswith("__init__.py") else name.rpartition(".")[0]
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            skip.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known and alias.name != name:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found = sub if sub in known else target
                if found in known and found != name:
                    yield found, node.lineno


def _imports(name, rel, tree):
    """Every module of the three apps this module imports, at any depth (function bodies too)."""
    return {module for module, _ in _import_lines(name, rel, tree, MODULES)}


def _cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_between_modules():
    graph = {}
    for name, (rel, path) in MODULES.items():
        imported = _imports(name, rel, _tree(path))
        # A package's __init__ importing its own children is how a package re-exports; a child
        # importing its package's __init__ for a name is then a cycle only if __init__ does.
        graph[name] = imported
    cycles = _cycles(graph)
    assert cycles == [], "import cycles:\n" + "\n".join(" ⇄ ".join(c) for c in cycles)


PRINCIPAL_MODULE = "knowledge/principal.py"
# Where a principal's kind may be read: the Principal type's own predicates and the access module.
KIND_READERS = (PRINCIPAL_MODULE, "knowledge/access.py")


def _principal_kinds():
    """The kinds the Principal type makes (`cls(kind="agent", …)`), read from its module."""
    kinds = set()
    for node in ast.walk(_tree(ROOT / PRINCIPAL_MODULE)):
        if isinstance(node, ast.Call):
            kinds.update(
                k.value.value
                for k in node.keywords
                if k.arg == "kind" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)
            )
    return kinds


PRINCIPAL_KINDS = _principal_kinds()


def _kind_literals(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _reads_kind(node) -> bool:
    """`x.kind`, or the same spelled `getattr(x, "kind")` / `operator.attrgetter("kind")(x)`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    if not isinstance(node, ast.Call):
        return False
    name = ast.unparse(node.func)
    if name == "getattr" and len(node.args) >= 2:
        return isinstance(node.args[1], ast.Constant) and node.args[1].value == "kind"
    if isinstance(node.func, ast.Call) and ast.unparse(node.func.func).endswith("attrgetter"):
        return any(isinstance(a, ast.Constant) and a.value == "kind" for a in node.func.args)
    return False


def principal_kind_compared(rel, tree):
    """Where any `.kind` is compared (==, !=, in, not in) with a principal kind literal, whatever
    the object is called (`request.user.kind == "agent"`, `p.kind in ("person", "system")`)."""
    if rel in KIND_READERS:
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Match) and isinstance(node.subject, ast.Attribute):
            cases = {c.pattern.value for c in node.cases if isinstance(c.pattern, ast.MatchValue)}
            literals = set().union(*(_kind_literals(v) for v in cases))
            if node.subject.attr == "kind" and literals & PRINCIPAL_KINDS:
                found.append(f"{rel}:{node.lineno} match {ast.unparse(node.subject)}")
        if not isinstance(node, ast.Compare):
            continue
        if not all(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops):
            continue
        operands = [node.left, *node.comparators]
        kinds = [o for o in operands if _reads_kind(o)]
        literals = set().union(*(_kind_literals(o) for o in operands))
        if kinds and literals & PRINCIPAL_KINDS:
            found.append(f"{rel}:{node.lineno} {ast.unparse(node)}")
    return found


def test_only_access_compares_principal_kind():
    found = [v for rel, path in _modules() for v in principal_kind_compared(rel, _tree(path))]
    assert found == [], (
        "a principal kind compared outside knowledge/access.py (use is_agent, is_person… or an "
        "access helper):\n" + "\n".join(found)
    )


def test_the_kind_check_sees_a_principal_kind_whatever_the_variable_is_called(tmp_path):
    assert sorted(PRINCIPAL_KINDS) == ["agent", "integration", "person", "system"]
    planted = {
        "memory/lifecycle/api.py": "def f(request):\n    return request.user.kind == 'agent'\n",
        "knowledge/entries/selectors.py": "def f(who):\n    return who.kind in ('person', 'system')\n",
        "curation/status/services.py": "def f(x):\n    return 'integration' != x.owner.kind\n",
        "memory/mcp/tools.py": "def f(p):\n    match p.kind:\n        case 'system':\n            return 1\n",
        "memory/recall/views.py": "def f(p):\n    return getattr(p, 'kind', '') == 'agent'\n",
        "curation/dreaming/views.py": "import operator\ndef f(p):\n    return operator.attrgetter('kind')(p) in ('person',)\n",
    }
    for rel, source in planted.items():
        assert principal_kind_compared(*_planted(tmp_path, rel, source)), rel
    # Other kinds (a channel's, a source's) and other attributes are not a principal's kind.
    clean = "def f(c, m):\n    return c.kind == 'dm' or m.author_kind == 'agent' or getattr(m, 'author_kind') == 'agent'\n"
    assert principal_kind_compared(*_planted(tmp_path, "memory/x/views.py", clean)) == []
    # The access module and the Principal type read kinds by design.
    for rel in KIND_READERS:
        assert principal_kind_compared(*_planted(tmp_path, rel, planted["memory/lifecycle/api.py"])) == []


# Modules at the web edge, where Django's own not-found is the answer: everything else (services,
# selectors, access, lifecycle steps, tasks, helpers…) speaks in the domain's NotFound.
WEB_EDGE_MODULES = ("api.py", "views.py", "serializers.py", "forms.py", "urls.py")


def _at_the_web_edge(rel):
    return rel.rpartition("/")[2] in WEB_EDGE_MODULES or "/management/commands/" in rel


def _raised_name(exc):
    if isinstance(exc, ast.Call):
        exc = exc.func
    if isinstance(exc, ast.Name):
        return exc.id
    if isinstance(exc, ast.Attribute):
        return exc.attr
    return ""


def django_not_found(rel, tree):
    """Where a module not at the web edge answers "not found" in Django's words: `raise Http404`,
    `raise X.DoesNotExist`, `get_object_or_404(…)` / `get_list_or_404(…)`."""
    if _at_the_web_edge(rel):
        return []
    found = []
    for node in ast.walk(tree):
        raised = _raised_name(node.exc) if isinstance(node, ast.Raise) and node.exc else ""
        if raised in ("Http404", "DoesNotExist"):
            found.append(f"{rel}:{node.lineno} raises {raised}")
        if isinstance(node, ast.Call) and _raised_name(node.func) in ("get_object_or_404", "get_list_or_404"):
            found.append(f"{rel}:{node.lineno} {_raised_name(node.func)}")
    return found


def test_services_and_access_raise_the_domain_not_found():
    found = [v for rel, path in _modules() for v in django_not_found(rel, _tree(path))]
    assert found == [], "raise knowledge.errors.NotFound instead:\n" + "\n".join(found)


def _planted(tmp_path, rel, source):
    """A throw-away module at `rel` (under tmp_path) holding a planted violation, parsed."""
    path = tmp_path / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return rel, _tree(path)


def test_the_not_found_check_sees_django_not_found_wherever_it_is_written(tmp_path):
    planted = {
        "memory/lifecycle/review.py": "from django.http import Http404\n\ndef f():\n    raise Http404('no')\n",
        "knowledge/entries/selectors.py": (
            "from django.shortcuts import get_object_or_404\n\n"
            "def f(model, pk):\n    return get_object_or_404(model, pk=pk)\n"
        ),
        "memory/recall/tasks.py": "def f(Memory):\n    raise Memory.DoesNotExist\n",
        "curation/status/checks.py": (
            "from django import shortcuts\n\ndef f(q):\n    return shortcuts.get_list_or_404(q)\n"
        ),
    }
    for rel, source in planted.items():
        assert django_not_found(*_planted(tmp_path, rel, source)), rel
    # The web edge keeps Django's words.
    for rel in ("memory/lifecycle/views.py", "knowledge/llm/api.py", "knowledge/x/management/commands/y.py"):
        assert django_not_found(*_planted(tmp_path, rel, planted["memory/lifecycle/review.py"])) == []


# What a memory row is called where its type is not written down: variables, attributes and
# functions with these in their names (`memory`, `block`, `lesson`, `memory_lock(…)`), besides the
# names bound from `Memory` itself (see _memory_bound).
MEMORY_NAMES = ("memory", "memories", "block", "lesson", "old", "mem")
MEMORY_TABLE = re.compile(
    r"UPDATE\s+(?:knowledge_memory\b|\{T_MEMORY\}|\{[^}]*Memory\._meta\.db_table\})", re.I
)
# `status = …` in SQL, unqualified (a SET list), not `m.status = 'active'` in a WHERE.
SQL_STATUS_SET = re.compile(r"(?<![.\w])status\s*=(?!=)", re.I)


def _named_like_memory(name: str) -> bool:
    return any(n in name.lower() for n in MEMORY_NAMES)


def _names_in(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _memory_bound(tree) -> set[str]:
    """Names that hold memory rows or querysets, whatever they are called: bound (assignment,
    loop, comprehension) from an expression that names `Memory` or another such name, and
    parameters annotated with `Memory`. Scopes are not told apart: a name bound to memories
    anywhere in the module counts everywhere in it (stricter, never looser)."""
    bound = {"Memory"}
    bindings = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            bindings += [(t, node.value) for t in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            bindings.append((node.target, node.value))
        elif isinstance(node, (ast.For, ast.comprehension)):
            bindings.append((node.target, node.iter))
        elif isinstance(node, ast.arg) and node.annotation and "Memory" in ast.unparse(node.annotation):
            bound.add(node.arg)
    changed = True
    while changed:
        changed = False
        for target, value in bindings:
            if _names_in(value) & bound or _memory_like(value, bound):
                for name in _names_in(target):
                    if name not in bound:
                        bound.add(name)
                        changed = True
    return bound


def _memory_like(node, bound) -> bool:
    """Whether `node` (a receiver or a value) is a memory row or queryset: rooted in a bound
    name, or named like one (`memory`, `self.block`, `memory_lock(…)`)."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        if isinstance(node, ast.Attribute) and _named_like_memory(node.attr):
            return True
        node = node.func if isinstance(node, ast.Call) else node.value
    return isinstance(node, ast.Name) and (node.id in bound or _named_like_memory(node.id))


def _names_status(node) -> bool:
    """A field list (or a single field name) that names `status`."""
    elts = node.elts if isinstance(node, (ast.List, ast.Tuple, ast.Set)) else [node]
    return any(isinstance(e, ast.Constant) and e.value == "status" for e in elts)


def _strings(tree):
    """(line, text) of every string in the module; an f-string as its source text, so an
    interpolated table name (`{T_MEMORY}`) stays visible."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            inside.update(id(n) for n in ast.walk(node) if n is not node)
            yield node.lineno, ast.unparse(node)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside:
            yield node.lineno, node.value


def memory_row_writes(rel, tree, bound=None):
    """Every place in a module that creates a memory row or sets a memory's `status`: `Memory(…)`
    and `Memory.objects.create/bulk_create/get_or_create/update_or_create`; `.update(status=…)`
    or `.update(**…)` on memories (a queryset in a variable of any name included); `.status =`
    and `setattr(…, "status", …)` on a memory; `save(update_fields=…)`, `bulk_update(…)` and
    rowsql's `update_fields(…)` naming status; SQL that updates the memory table and sets
    `status` (in the statement, or in a fragment the module splices into it). `bound`: the names
    that hold memories (by default, those the module binds)."""
    bound = _memory_bound(tree) if bound is None else bound
    found = []

    def hit(node, what):
        found.append(f"{rel}:{node.lineno} {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            receiver = func.value if isinstance(func, ast.Attribute) else None
            keywords = {k.arg for k in node.keywords}
            if isinstance(func, ast.Name) and func.id == "Memory":
                hit(node, "Memory(…)")
            elif (
                name in ("create", "bulk_create", "get_or_create", "update_or_create")
                and _memory_like(receiver, {"Memory"})
                and "Memory" in _names_in(receiver)
            ):
                hit(node, f"Memory.objects.{name}(…)")
            elif name == "update" and receiver is not None and _memory_like(receiver, bound):
                if "status" in keywords or None in keywords:
                    hit(node, f"{ast.unparse(func)}(status=…)")
            elif name == "setattr" and node.args and _memory_like(node.args[0], bound):
                if len(node.args) > 1 and _names_status(node.args[1]):
                    hit(node, "setattr(…, 'status', …)")
            elif name == "save" and receiver is not None and _memory_like(receiver, bound):
                if any(k.arg == "update_fields" and _names_status(k.value) for k in node.keywords):
                    hit(node, "save(update_fields=[…'status'…])")
            elif name == "bulk_update" and len(node.args) > 1 and _names_status(node.args[1]):
                hit(node, "bulk_update(…, […'status'…])")
            elif (
                name == "update_fields"
                and node.args
                and _memory_like(node.args[0], bound)
                and any(_names_status(a) for a in node.args[1:])
            ):
                hit(node, "update_fields(…, 'status')")
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute) and t.attr == "status" and _memory_like(t.value, bound):
                    hit(t, f"{ast.unparse(t)} = …")
    strings = list(_strings(tree))
    if any(MEMORY_TABLE.search(text) for _, text in strings):
        for line, text in strings:
            if SQL_STATUS_SET.search(text):
                found.append(f"{rel}:{line} SQL setting status on the memory table")
    return sorted(set(found))


def _the_one_writer(rel):
    return rel.startswith("knowledge/memories/") or rel == "knowledge/models/memories.py"


def _parameters(function):
    args = function.args
    return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]} - {"self", "cls"}


def status_helpers(modules):
    """Functions outside the one writer that set `status` on one of their parameters, whatever
    it is called (`def mark(rows, to): rows.update(status=to)`): {name: "rel:line"}. A memory
    handed to one from another module is a status write the per-module check cannot see."""
    helpers = {}
    for rel, tree in modules:
        if _the_one_writer(rel):
            continue
        bound = _memory_bound(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                through_parameters = set(memory_row_writes(rel, node, bound | _parameters(node)))
                if through_parameters - set(memory_row_writes(rel, node, bound)):
                    helpers[node.name] = f"{rel}:{node.lineno}"
    return helpers


def helper_status_writes(rel, tree, helpers):
    """Calls that hand a memory row or queryset to a status-setting helper (status_helpers)."""
    bound = _memory_bound(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        handed = [*node.args, *(k.value for k in node.keywords)]
        if name in helpers and any(_memory_like(arg, bound) for arg in handed):
            found.append(f"{rel}:{node.lineno} {name}(…) sets a memory's status ({helpers[name]})")
    return found


def one_writer_breaches(modules):
    """Every memory row write outside knowledge/memories/: in the module itself, or through a
    helper of another module."""
    modules = [(rel, tree) for rel, tree in modules if not _the_one_writer(rel)]
    helpers = status_helpers(modules)
    found = []
    for rel, tree in modules:
        found += memory_row_writes(rel, tree) + helper_status_writes(rel, tree, helpers)
    return found


def test_memory_rows_are_written_by_the_one_writer():
    found = one_writer_breaches((rel, _tree(path)) for rel, path in _modules())
    assert found == [], "memory rows written outside knowledge/memories/:\n" + "\n".join(found)


def test_the_one_writer_check_sees_a_status_write_through_a_helper_of_another_module(tmp_path):
    helper = _planted(tmp_path, "knowledge/rows.py", "def mark(rows, to):\n    rows.update(status=to)\n")
    caller = (
        "from knowledge.rows import mark\n\ndef f(ids):\n    mark(Memory.objects.filter(pk__in=ids), 'x')\n"
    )
    found = one_writer_breaches([helper, _planted(tmp_path, "memory/recall/planted.py", caller)])
    assert [f.split(" ")[0] for f in found] == ["memory/recall/planted.py:4"], found
    # Its harmless twin: the same helper handed another model's rows.
    twin = "from knowledge.rows import mark\n\ndef f(ids):\n    mark(Conversation.objects.filter(pk__in=ids), 'x')\n"
    assert one_writer_breaches([helper, _planted(tmp_path, "memory/recall/twin.py", twin)]) == []


def test_the_one_writer_check_sees_a_status_write_whatever_it_is_called(tmp_path):
    planted = {
        "queryset variable": "def f(ids):\n    qs = Memory.objects.filter(pk__in=ids)\n    qs.update(status='active')\n",
        "m.status then save": "def f():\n    m = Memory.objects.get(pk=1)\n    m.status = 'active'\n    m.save()\n",
        "raw UPDATE": "def f(c):\n    c.execute(\"UPDATE knowledge_memory SET status = 'active' WHERE id = 1\")\n",
        "update_fields": "def f(memory):\n    update_fields(memory, 'status')\n",
        "a spliced SQL fragment": (
            "SET = {'x': \"status = 'queued', status_reason = f.reason\"}\n"
            "SQL = f'UPDATE {T_MEMORY} m SET stale = true, {{set}} FROM f WHERE m.id = f.id'\n"
        ),
        "an annotated parameter": "def f(row: Memory):\n    row.status, row.status_reason = 'x', 'y'\n",
        "a loop over memories": "def f(ids):\n    for r in Memory.objects.filter(pk__in=ids):\n        setattr(r, 'status', 'x')\n",
        "a new row": "def f(agent):\n    return Memory(owner=agent, text='x')\n",
    }
    for what, source in planted.items():
        assert memory_row_writes(*_planted(tmp_path, "memory/recall/planted.py", source)), what
    # Other rows' status, a dict's update and a WHERE clause are not memory writes.
    innocent = (
        "def f(conversation, body, c):\n"
        "    conversation.status = 'finished'\n"
        "    conversation.save(update_fields=['status'])\n"
        "    body.update(status='error')\n"
        "    c.execute(\"SELECT id FROM knowledge_memory m WHERE m.status = 'active'\")\n"
    )
    assert memory_row_writes(*_planted(tmp_path, "memory/recall/innocent.py", innocent)) == []


def api_without_its_serializers(rel, tree):
    """An `api.py` that does not import from the `serializers.py` beside it (its shapes then
    live elsewhere, or in the view module itself)."""
    package = rel[: -len("/api.py")].replace("/", ".")
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.module == f"{package}.serializers" or (
            node.module == package and any(alias.name == "serializers" for alias in node.names)
        ):
            return []
    return [f"{rel} imports nothing from {package}.serializers"]


def test_every_api_module_takes_its_shapes_from_its_serializers():
    found = []
    for rel, path in _modules():
        if path.name == "api.py":
            if not (path.parent / "serializers.py").exists():
                found.append(f"{rel} has no serializers.py beside it")
            else:
                found += api_without_its_serializers(rel, _tree(path))
    assert found == [], "api.py without its serializers:\n" + "\n".join(found)


def test_the_serializers_check_sees_an_api_that_imports_another_packages_shapes(tmp_path):
    elsewhere = "from memory.consolidation.serializers import ConflictSerializer\n"
    assert api_without_its_serializers(*_planted(tmp_path, "memory/reconciler/api.py", elsewhere))
    own = "from memory.reconciler.serializers import ConflictSerializer\n"
    assert api_without_its_serializers(*_planted(tmp_path, "memory/reconciler/api.py", own)) == []
    module = "from memory.reconciler import serializers\n"
    assert api_without_its_serializers(*_planted(tmp_path, "memory/reconciler/api.py", module)) == []


@pytest.mark.parametrize("app", APPS)
def test_no_module_over_the_size_limit(app):
    long = []
    for rel, path in _modules():
        if not rel.startswith(app + "/") or "/demo/" in rel:
            continue
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            long.append(f"{rel}: {lines} lines")
    assert long == [], f"modules over {MAX_LINES} lines:\n" + "\n".join(long)


# Each app's sub-packages and top-level modules, lowest first (docs/ARCHITECTURE.md shows the
# same lists). A module may import its own package and anything listed before it, never one
# listed after it: when two need each other, the piece both need moves down.
LAYERS = {
    "knowledge": (
        # helpers that know no model
        "errors", "health", "limits", "metrics", "rowsql", "schema", "signals", "termstats",
        "tokens", "replica", "web", "kick",
        # the rows, and what every layer above reads about them
        "models", "settings_store", "stores", "principal", "refs", "audit", "memories", "names",
        "access", "principals",
        # the domains
        "embeddings", "llm", "entries", "conversations", "events", "materials", "erasure", "restore",
        "portability", "backup",
        # entry points
        "middleware", "tasks", "management", "apps", "urls",
    ),
    "memory": (
        # what every package compares texts and memories by
        "models", "matching", "links",
        # read side: the recall a context is compiled from, and what it shows
        "history", "recall", "gate",
        # write side: one writer and what runs on top of it
        "provenance", "lifecycle", "conversations", "skills", "consolidation", "reconciler",
        "imports", "mcp",
        # entry points
        "caches", "jobs", "tasks", "templatetags", "management", "apps", "urls",
    ),
    "curation": (
        "models", "schedules", "model_status", "distiller", "receivers",
        "dreaming", "search", "status", "materials", "demo",
        "tasks", "management", "apps", "urls",
    ),
}  # fmt: skip

# The order of the apps and of each app's packages is import-linter's: the contracts in
# pyproject.toml ([tool.importlinter]), run by `make lint` (imports inside functions count). LAYERS
# above lists the same order for the module checks here; the two must agree.


def test_the_import_contracts_list_the_packages_in_layers_order():
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layered = {
        c["containers"][0]: tuple(reversed(c["layers"])) for c in config["contracts"] if c.get("containers")
    }
    assert layered == LAYERS


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports"), "--no-cache"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
    )


@pytest.mark.parametrize(
    "module,planted",
    [
        ("knowledge/limits.py", "import memory.models  # an app imports the app above it\n"),
        ("knowledge/limits.py", "def _planted():\n    from memory.recall import scope\n\n    return scope\n"),
        (
            "memory/matching/terms.py",
            "def _planted():\n    from memory.recall import scope\n\n    return scope\n",
        ),
        ("memory/recall/scope.py", "from memory.matching import terms as _planted  # harmless: downwards\n"),
        ("memory/mcp/tools.py", "def _planted():\n    from memory.recall import api\n\n    return api\n"),
        (
            "knowledge/events/views.py",
            "from knowledge.events import api as _planted  # a view over the API\n",
        ),
    ],
    ids=[
        "app-upward",
        "app-upward-in-a-function",
        "package-upward",
        "harmless-twin",
        "mcp-over-api",
        "view-over-api",
    ],
)
def test_make_lint_refuses_an_upward_import_planted_in_a_copy(tmp_path, module, planted):
    for app in ("brainsite", "knowledge", "memory", "curation"):
        shutil.copytree(
            ROOT / app, tmp_path / app, ignore=shutil.ignore_patterns("__pycache__", "migrations")
        )
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    for app in ("knowledge", "memory", "curation"):  # the contracts skip migrations; keep the packages
        (tmp_path / app / "migrations").mkdir()
        (tmp_path / app / "migrations" / "__init__.py").write_text("")
    target = tmp_path / module
    target.write_text(target.read_text() + "\n\n" + planted)
    done = _lint_imports(tmp_path)
    if module == "memory/recall/scope.py":
        assert done.returncode == 0, done.stdout + done.stderr
    else:
        assert done.returncode != 0 and "BROKEN" in done.stdout, done.stdout + done.stderr
        assert module.replace("/", ".").removesuffix(".py") in done.stdout


# Where a request's names arrive: these modules turn a name into a row only through
# knowledge/names.py (imported from there; knowledge/access.py re-exports none of it) or an access
# `*_get_for`, so an unknown name gets one answer and visibility is decided once. A lookup by name
# of their own is a second resolver.
NAME_EDGE_MODULES = ("views.py", "api.py", "serializers.py", "forms.py")


def _where_names_arrive(rel):
    return rel.rpartition("/")[2] in NAME_EDGE_MODULES or rel.startswith("memory/mcp/")


def _by_name(call):
    return any(k.arg == "name" or (k.arg or "").startswith("name__") for k in call.keywords)


def name_lookups(rel, tree):
    """Where a view, API view, serializer, form or MCP tool module looks a row up by name itself:
    `….filter/get/exclude(name=…)` (or `name__in=…`, any `name__` lookup) on a manager or
    queryset, or `get_object_or_404(…, name=…)`."""
    if not _where_names_arrive(rel):
        return []
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _by_name(node)):
            continue
        called = _raised_name(node.func)
        if called in ("get_object_or_404", "get_list_or_404"):
            found.append(f"{rel}:{node.lineno} {called}(…, name=…)")
        elif isinstance(node.func, ast.Attribute) and called in ("filter", "get", "exclude"):
            found.append(f"{rel}:{node.lineno} .{called}(name=…)")
    return found


def test_names_resolve_in_names_or_access_only():
    found = [v for rel, path in _modules() for v in name_lookups(rel, _tree(path))]
    assert found == [], (
        "resolve the name through knowledge/names.py (names.agent_named, names.owner_selected, "
        "names.scope_for …) or an access *_get_for:\n" + "\n".join(found)
    )


def test_the_name_check_sees_a_lookup_by_name_at_the_edge(tmp_path):
    planted = {
        "memory/skills/views.py": (
            "from knowledge.models import Agent\n\ndef f(request, x):\n"
            "    return Agent.objects.filter(name=x).first()\n"
        ),
        "memory/reconciler/api.py": (
            "from django.shortcuts import get_object_or_404\nfrom knowledge.models import Agent\n\n"
            "def f(request, n):\n    return get_object_or_404(Agent, name=n)\n"
        ),
        "memory/mcp/tools.py": (
            "from knowledge.models import Channel\n\ndef f(names):\n"
            "    return Channel.objects.select_related('person').filter(name__in=names)\n"
        ),
        "knowledge/principals/forms.py": (
            "from knowledge.models import Agent\n\ndef f(name):\n    return Agent.objects.get(name=name)\n"
        ),
    }
    for rel, source in planted.items():
        assert name_lookups(*_planted(tmp_path, rel, source)), rel
    # names.py, access.py and services resolve names; the edge may filter by a related name.
    for rel in ("knowledge/names.py", "knowledge/access.py", "memory/skills/services.py"):
        assert name_lookups(*_planted(tmp_path, rel, planted["memory/skills/views.py"])) == [], rel
    related = "def f(qs, owner):\n    return qs.filter(owner__name=owner)\n"
    assert name_lookups(*_planted(tmp_path, "knowledge/materials/views.py", related)) == []

"""The structural promises of docs/ARCHITECTURE.md, checked by walking the source with `ast`.

Each check names the offending module and line, so a failure says what to move.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
APPS = ("knowledge", "memory", "curation")
MAX_LINES = 600

# Where a memory row may be created or its status set: the one writer, and the two undo paths
# that put back exactly what was (audit restore, consolidation plan revert) or an admin's
# import of an export (rows come back in their exported state).
MEMORY_WRITERS = (
    "knowledge/memories/",
    "knowledge/restore/",
    "knowledge/portability/",
)


def _modules():
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
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
    return ast.parse(path.read_text(), filename=str(path))


def _is_type_checking(node):
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(name, rel, tree):
    """Every module of the three apps this module imports, at any depth (function bodies too)."""
    package = name if rel.endswith("__init__.py") else name.rpartition(".")[0]
    found = set()
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            skip.update(id(n) for n in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
    return {m for m in found if m in MODULES and m != name}


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


PRINCIPAL_MODULE = "knowledge/principals/principal.py"
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
        kinds = [o for o in operands if isinstance(o, ast.Attribute) and o.attr == "kind"]
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
    }
    for rel, source in planted.items():
        assert principal_kind_compared(*_planted(tmp_path, rel, source)), rel
    # Other kinds (a channel's, a source's) and other attributes are not a principal's kind.
    clean = "def f(c, m):\n    return c.kind == 'dm' or m.author_kind == 'agent'\n"
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


MEMORY_NAMES = ("memory", "memories", "block", "lesson", "old", "mem")


def _memory_receiver(node):
    if isinstance(node, ast.Name):
        return any(n in node.id.lower() for n in MEMORY_NAMES)
    if isinstance(node, ast.Attribute):
        return any(n in node.attr.lower() for n in MEMORY_NAMES)
    return False


def _memory_row_writes(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            # Memory(...), Memory.objects.create(...), Memory.objects.bulk_create(...)
            if isinstance(func, ast.Name) and func.id == "Memory":
                yield node.lineno, "Memory(...)"
            if isinstance(func, ast.Attribute) and func.attr in ("create", "bulk_create", "update"):
                chain = func.value
                while isinstance(chain, (ast.Attribute, ast.Call)):
                    chain = chain.func if isinstance(chain, ast.Call) else chain.value
                on_memory = isinstance(chain, ast.Name) and chain.id == "Memory"
                if on_memory and func.attr != "update":
                    yield node.lineno, f"Memory.objects.{func.attr}"
                if on_memory and func.attr == "update" and any(k.arg == "status" for k in node.keywords):
                    yield node.lineno, "Memory….update(status=…)"
            # memory.save(update_fields=[..."status"...])
            if isinstance(func, ast.Attribute) and func.attr == "save" and _memory_receiver(func.value):
                for k in node.keywords:
                    fields = k.value.elts if isinstance(k.value, (ast.List, ast.Tuple)) else []
                    if k.arg == "update_fields" and any(
                        isinstance(e, ast.Constant) and e.value == "status" for e in fields
                    ):
                        yield node.lineno, "save(update_fields=[…'status'…])"
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Attribute)
                    and target.attr == "status"
                    and _memory_receiver(target.value)
                ):
                    yield node.lineno, f"{ast.unparse(target)} = …"


def test_memory_rows_are_written_by_the_one_writer():
    found = []
    for rel, path in _modules():
        if rel.startswith(MEMORY_WRITERS) or rel == "knowledge/models/memories.py":
            continue
        if "/demo/" in rel or "/management/commands/seed_demo" in rel:
            continue
        for line, what in _memory_row_writes(_tree(path)):
            found.append(f"{rel}:{line} {what}")
    assert found == [], "memory rows written outside knowledge/memories/:\n" + "\n".join(found)


def test_every_package_with_an_api_has_serializers():
    missing = []
    for rel, path in _modules():
        if path.name == "api.py" and not (path.parent / "serializers.py").exists():
            missing.append(rel)
    assert missing == [], "api.py without serializers.py beside it:\n" + "\n".join(missing)


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

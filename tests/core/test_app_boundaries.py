"""Apps do not write another app's tables: a write to a model of another app (`.objects...create/update/
delete/...`) goes through that app's services (e.g. operations' `operations_cancel_unfinished`,
`operation_deadline_set`, `operation_start`). Checked on the source, so a new cross-app write fails `make test`."""
import ast
from pathlib import Path

from django.conf import settings

APPS = Path(settings.BASE_DIR) / "apps"
WRITES = {"create", "update", "delete", "bulk_create", "bulk_update", "get_or_create", "update_or_create"}


def _foreign_models(tree: ast.AST, app: str) -> dict[str, str]:
    """Names bound in a module to a model class of another app: `from apps.<other>.models[...] import X`."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("apps."):
            parts = node.module.split(".")
            if len(parts) > 2 and parts[1] != app and parts[2] == "models":
                out.update({n.asname or n.name: parts[1] for n in node.names})
    return out


def _cross_app_writes(source: str, name: str) -> list[str]:
    """`name` is the module's path under the repository root, e.g. ``apps/compute/services/instances.py``."""
    app = name.split("/")[1]
    tree = ast.parse(source)
    foreign = _foreign_models(tree, app)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES):
            continue
        value = node.func.value
        while isinstance(value, ast.Call | ast.Attribute):
            if (isinstance(value, ast.Attribute) and value.attr == "objects" and isinstance(value.value, ast.Name)
                    and value.value.id in foreign):
                found.append(f"{name}:{node.lineno} {value.value.id}.{node.func.attr} "
                             f"(a table of apps.{foreign[value.value.id]})")
                break
            value = value.func if isinstance(value, ast.Call) else value.value
    return found


def test_no_app_writes_another_apps_tables():
    found = [w for p in sorted(APPS.rglob("*.py")) if "migrations" not in p.parts
             for w in _cross_app_writes(p.read_text(), p.relative_to(APPS.parent).as_posix())]
    assert found == []


def test_the_check_sees_a_cross_app_write():
    source = ("from apps.operations.models import Operation\n\n\ndef f(pk):\n"
              "    Operation.objects.filter(pk=pk).exclude(step='y').update(step='x')\n")
    assert _cross_app_writes(source, "apps/compute/probe.py") == [
        "apps/compute/probe.py:5 Operation.update (a table of apps.operations)"]
    assert _cross_app_writes(source, "apps/operations/probe.py") == []  # its own table

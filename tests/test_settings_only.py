"""Environment variables are read in one place, webapp/settings.py: a module that read its own had a setting no one
could find, and a test had to patch the module rather than the setting."""
import ast
from pathlib import Path

from tests.source_scan import ROOT, findings

# The trainer runs without Django: its entry point reads what its supervisor and launcher (accelerate, torchrun) set.
ALLOWED = {"webapp/settings.py", "webapp/settings_production.py", "rl/train.py", "rl/grpo_config.py"}


def environment_reads(path: Path) -> list[int]:
    """Lines of `os.environ.get(...)`, `os.environ[...]` read, and `os.getenv(...)` in a module."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = node.func
            if (target.attr == "get" and ast.unparse(target.value) == "os.environ") or ast.unparse(target) == "os.getenv":
                lines.append(node.lineno)
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ" and isinstance(node.ctx, ast.Load):
            lines.append(node.lineno)
    return lines


def test_only_settings_read_the_environment_in_the_web_and_worker_code():
    assert findings(environment_reads, skip=ALLOWED) == {}


def test_the_web_server_entry_point_only_sets_the_variables_that_settings_read():
    # asgi.py sets DJANGO_SETTINGS_MODULE, HF_HUB_OFFLINE and the pool flag before settings load; it reads none
    assert environment_reads(ROOT / "webapp" / "asgi.py") == []

"""One launch request: the API's JSON, the launch form and a clone read the same record (webapp/runs/launch_request.py),
so the list of launch settings is written once."""
import ast
from pathlib import Path

import pytest

from rl.params import FieldError
from tests.source_scan import findings
from webapp.runs.launch_request import LaunchRequest



def test_it_reads_every_launch_setting_from_json():
    data = {name: f"value of {name}" for name in LaunchRequest.names()}
    assert LaunchRequest.from_json(data).as_dict() == data


def test_it_names_the_first_unknown_key():
    with pytest.raises(FieldError) as error:
        LaunchRequest.from_json({"name": "x", "zeta": 1, "alpha": 2})
    assert error.value.field == "alpha"


def settings_listed(path: Path) -> list[int]:
    """Lines of tuples, lists and sets of strings naming four or more launch settings (a run's model fields, a
    query's keywords and a page's defaults name settings too, each for its own purpose)."""
    names = set(LaunchRequest.names())
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = [e.value for e in node.elts if isinstance(e, ast.Constant)]
        else:
            continue
        if len(names.intersection(i for i in items if isinstance(i, str))) >= 4:
            lines.append(node.lineno)
    return lines


def test_no_other_module_lists_the_launch_settings():
    assert findings(settings_listed, folders=("webapp",), skip={"webapp/runs/launch_request.py"}) == {}


def test_the_scan_finds_a_list(tmp_path):
    module = tmp_path / "view.py"
    module.write_text('FIELDS = ("name", "method", "prompt_set", "max_steps")\n')
    assert settings_listed(module) == [1]

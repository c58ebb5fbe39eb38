"""The product's own modules, read as source by the tests that keep a concept in one place (the environment in
settings, metric names in the catalogue, launch settings in the launch request)."""
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent


def findings(scan: Callable[[Path], list], folders=("rl", "webapp", "workers"), skip=()) -> dict[str, list]:
    """{module path: what scan(path) found} for every module of `folders` (migrations and `skip` left out) where
    it found something."""
    found = {}
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if "/migrations/" not in name and name not in skip:
                hits = scan(path)
                if hits:
                    found[name] = hits
    return found

"""The code's layers (issue 24): dependencies point one way, workers -> webapp -> rl, and inside webapp from the
pages of runs to the alerts that judge them to the metric store both read. Read from the source: every import,
those inside functions included, so none can hide a dependency by moving into a function."""
import ast
from pathlib import Path

from tests.source_scan import findings

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rl", "webapp", "workers")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imports() -> dict[str, set[str]]:
    """{module: the modules and outside packages it imports}, for every module of PACKAGES."""
    known = modules()
    graph = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join(parent + ([base] if base else []))
                targets |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names}
        graph[name] = targets
    return graph


def package_of(module: str) -> str:
    """webapp's apps and packages (webapp.runs, webapp.metrics, ...) and webapp's own modules (webapp), rl, workers."""
    parts = module.split(".")
    if parts[0] == "webapp" and len(parts) > 1 and (ROOT / "webapp" / parts[1]).is_dir():
        return f"webapp.{parts[1]}"
    return parts[0]


def depends(graph, source: str, target: str) -> list[tuple[str, str]]:
    """The imports of a module of package `source` from package `target`."""
    return sorted((module, name) for module, names in graph.items() if package_of(module) == source
                  for name in names if name == target or name.startswith(target + "."))


def test_rl_imports_neither_django_nor_the_web_side_nor_the_workers():
    graph = imports()
    assert depends(graph, "rl", "django") == depends(graph, "rl", "webapp") == depends(graph, "rl", "workers") == []


def test_the_web_side_never_imports_the_workers():
    graph = imports()
    assert [hit for package in {package_of(m) for m in graph if m.startswith("webapp")}
            for hit in depends(graph, package, "workers")] == []


def test_the_alerts_judge_runs_without_importing_the_runs_package():
    # runs -> alerts (ingestion, the lifecycle and the pages call the engine and read alerts); alerts read the
    # metric store and take the run they judge as an argument
    graph = imports()
    assert depends(graph, "webapp.alerts", "webapp.runs") == []
    assert depends(graph, "webapp.runs", "webapp.alerts") != []


def test_the_metric_store_imports_no_app_that_uses_it():
    graph = imports()
    for user in ("webapp.runs", "webapp.alerts", "webapp.external", "webapp.accounts"):
        assert depends(graph, "webapp.metrics", user) == []


def test_no_two_apps_import_each_other():
    graph = imports()
    apps = sorted({package_of(m) for m in graph if package_of(m).startswith("webapp.")})
    assert [(a, b) for a in apps for b in apps if a < b and depends(graph, a, b) and depends(graph, b, a)] == []


def test_no_module_imports_itself_through_others():
    graph = imports()
    inside = {module: {name for name in names if name in graph and name != module} for module, names in graph.items()}
    cycles = []
    for start in inside:  # a path back to `start` through the modules it imports
        seen, frontier = set(), list(inside[start])
        while frontier:
            module = frontier.pop()
            if module == start:
                cycles.append(start)
                break
            if module not in seen:
                seen.add(module)
                frontier.extend(inside[module])
    assert cycles == []


def test_no_method_imports_another_method():
    # shared setups live in rl/methods/setups.py, RLPR and DARL's reward parts in rl/methods/probability_reward.py, and
    # R-Zero's phases inside its own package: a method's module changes without reaching into another's
    graph = imports()
    # the registry (rl/methods/__init__.py) imports every method's module, and the schema
    methods = {name for name in graph["rl.methods"] if name.startswith("rl.methods.")} - {"rl.methods.schema"}
    assert len(methods) == 12
    crossing = sorted((module, name) for module in graph if module.startswith("rl.methods.")
                      for name in graph[module] for other in methods
                      if (name == other or name.startswith(other + ".")) and not module.startswith(other))
    assert crossing == []


def test_the_metric_stores_rows_are_read_and_written_only_through_its_interface():
    # webapp/metrics/series.py is the one route to the series, points and chunks (names, read, read_between,
    # value_at, latest, latest_value, ...), and the models are its own app's (webapp/metrics/apps.py)
    graph = imports()
    direct = sorted(module for module, names in graph.items() if "webapp.metrics.models" in names
                    and not module.startswith("webapp.metrics"))
    assert direct == []


def test_one_loop_supervises_a_run_whatever_its_engine():
    # the local trainer is an engine like Slurm and Ray (workers/engines/local.py): the supervisor alone ingests a
    # run's log and relays its cancel, and no engine reaches back into the run's rows or its ingestion
    graph = imports()
    ingesting = sorted(module for module, names in graph.items()
                       if module.startswith("workers.") and "workers.event_tail" in names)
    assert ingesting == ["workers.supervisor"]
    engines = [module for module in graph if module.startswith("workers.engines.")]
    assert "workers.engines.local" in engines
    reaching = sorted((module, name) for module in engines for name in graph[module]
                      if name.startswith(("webapp", "workers.supervisor", "workers.run_io")))
    assert reaching == []


def test_every_model_belongs_to_the_app_whose_folder_holds_it():
    # the metric store's and the text index's models were the runs app's (app_label "runs"); they moved to their own
    # apps with state-only migrations (metrics/0001, explorer/0001), their tables unchanged
    from django.apps import apps

    strays = sorted(f"{model.__module__}.{model.__name__} ({model._meta.app_label})" for model in apps.get_models()
                    if model.__module__.startswith("webapp.")
                    and not model.__module__.startswith(apps.get_app_config(model._meta.app_label).name))
    assert strays == []


def test_the_text_index_rows_are_the_explorers_alone():
    graph = imports()
    direct = sorted(module for module, names in graph.items() if "webapp.explorer.models" in names
                    and not module.startswith("webapp.explorer"))
    assert direct == []


def test_the_lease_and_the_engines_job_are_written_by_the_lifecycle_alone():
    # RunLease and EngineJob left the Run for tables of their own (runs/0023, runs/0024); the pages read them through
    # the run (`run.job`, `engine_json`), and every write is webapp/runs/lifecycle.py's, under the run's row lock
    def naming(path):
        return sorted({name for name in ("RunLease", "EngineJob") if name in path.read_text(encoding="utf-8")})

    assert findings(naming, skip={"webapp/runs/models.py", "webapp/runs/lifecycle.py"}) == {}

"""Where the run and compare pages chart each metric: its group (a section of the page), its place in the
group (both from rl/metric_catalogue.py), and the alert rules whose markers it carries. The pages are sent
`catalogue()` and static/js/charts.js applies it to every name, those that first arrive live included; it holds no
list of names itself."""
from rl import metric_catalogue
from rl.methods import metric_prefixes
from webapp.alerts.rule_specs import RULES


def _rules() -> list[dict]:
    """A name's group is the first rule it meets: one of its names, or a name starting with one of its prefixes
    (a method's own metrics, `evol_rl/...`, are rewards); any other name is "other"."""
    method_prefixes = tuple(f"{prefix}/" for prefix in metric_prefixes())
    return [{"group": group, "names": list(metric_catalogue.names(group=group)),
             "prefixes": [*metric_catalogue.GROUP_PREFIXES[group], *(method_prefixes if group == "rewards" else ())]}
            for group in metric_catalogue.GROUPS if group in metric_catalogue.GROUP_PREFIXES]


def catalogue() -> dict:
    """What charts.js needs to place any metric: the groups, the rules, the order, and for each alert rule the
    metrics it reads (its marker goes on those charts; a rule that reads none, stalled or run_failed, marks
    every chart)."""
    return {
        "groups": list(metric_catalogue.GROUPS),
        "rules": _rules(),
        "order": [record.name for record in metric_catalogue.RECORDS],
        "rule_metrics": {kind: list(spec.metrics) for kind, spec in RULES.items() if spec.metrics},
    }

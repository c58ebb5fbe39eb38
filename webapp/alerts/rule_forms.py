"""The alert rules' thresholds as form fields, named rule-KIND-PARAM: the team's alert settings (saved) and the
backtest page (tried, never saved) show and read them alike."""
from .rule_specs import RULES, resolve_thresholds


def rule_rows(overrides: dict, kinds=None) -> list[dict]:
    """Each rule (of `kinds`, default all) with its params' effective values under `overrides`."""
    effective = resolve_thresholds(overrides)
    rows = []
    for spec in RULES.values():
        if kinds is not None and spec.kind not in kinds:
            continue
        params = [{"param": p, "value": effective[spec.kind].get(p.name),
                   "overridden": p.name in overrides.get(spec.kind, {})} for p in spec.params]
        rows.append({"spec": spec, "params": params})
    return rows


def overrides_from_form(data, kinds=None) -> dict:
    """Fields named rule-KIND-PARAM; only values that differ from the defaults are kept as
    overrides, so a later change of a default still reaches teams that never touched it. A FieldError names a bad
    one (alert_rules.KIND.PARAM)."""
    defaults = resolve_thresholds()
    overrides = {}
    for spec in RULES.values():
        if kinds is not None and spec.kind not in kinds:
            continue
        for p in spec.params:
            key = f"rule-{spec.kind}-{p.name}"
            if p.type == "bool":
                value = key in data
            elif data.get(key, "") == "":
                continue
            else:
                value = data[key]
            coerced = p.coerce(value, f"alert_rules.{spec.kind}.{p.name}")
            if coerced != defaults[spec.kind].get(p.name):
                overrides.setdefault(spec.kind, {})[p.name] = coerced
    return overrides

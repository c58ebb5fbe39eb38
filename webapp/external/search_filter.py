"""MLflow's search filters for runs/search and experiments/search, the part clients send: clauses joined by
AND, each `ENTITY.KEY OP VALUE` with ENTITY one of attributes, metrics, params, tags (and their short
forms), OP one of = != < <= > >= LIKE ILIKE IN, a key quoted with backticks or double quotes when it holds
anything but letters, digits, `_` and `.`. Anything else is INVALID_PARAMETER_VALUE naming what was not
understood. Runs are filtered after they are read: a team's experiments hold thousands of runs, not millions."""
import base64
import binascii
import math
import re
from dataclasses import dataclass


from . import logged_metrics
from .like import MAX_PATTERN_LENGTH, like
from .mlflow_protocol import STATUS_OF_STATE, invalid
from .models import Experiment, ExternalRun

ENTITIES = {"attributes": "attributes", "attribute": "attributes", "attr": "attributes", "run": "attributes",
            "metrics": "metrics", "metric": "metrics", "params": "params", "param": "params", "parameter": "params",
            "parameters": "params", "tags": "tags", "tag": "tags", "dataset": "datasets", "datasets": "datasets"}
# MLflow's searchable run attributes (RunInfo's, and SearchUtils' aliases: created is start_time, "Run name" run_name)
ATTRIBUTES = ("run_id", "run_name", "status", "user_id", "start_time", "end_time", "artifact_uri", "lifecycle_stage",
              "name", "experiment_id", "creation_time", "last_update_time")
ALIASES = {"created": "start_time", "Created": "start_time", "run name": "run_name", "Run name": "run_name",
           "Run Name": "run_name"}
NUMERIC_ATTRIBUTES = ("start_time", "end_time", "creation_time", "last_update_time")
DATASET_KEYS = ("name", "digest", "context")
_STRING = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_TOKENS = [  # tried in order at each position
    ("and", re.compile(r"AND\b", re.IGNORECASE)),
    ("op", re.compile(r"<=|>=|!=|=|<|>|IS\s+NOT\s+NULL\b|IS\s+NULL\b|NOT\s+ILIKE\b|NOT\s+LIKE\b|NOT\s+IN\b|ILIKE\b|"
                      r"LIKE\b|IN\b", re.IGNORECASE)),
    ("string", re.compile(_STRING)),
    ("list", re.compile(r"\((?:[^()'\"]|" + _STRING + r")*\)")),
    # ENTITY.KEY, or a bare KEY (an attribute, as MLflow reads `run_name LIKE 'x%'`)
    ("ident", re.compile(r"[A-Za-z_]\w*\.(?:`[^`]*`|\"[^\"]*\"|[\w./\-:@]+)|`[^`]*`|[A-Za-z_]\w*")),
    ("number", re.compile(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")),
]


class _Token:
    def __init__(self, kind: str, text: str):
        self.kind, self.text = kind, text

    def group(self, kind: str):
        return self.text if kind == self.kind else None


def _tokens(text: str) -> list:
    out, position = [], 0
    while True:
        while position < len(text) and text[position].isspace():
            position += 1
        if position >= len(text):
            return out
        for kind, pattern in _TOKENS:
            match = pattern.match(text, position)
            if match:
                out.append(_Token(kind, match.group(0)))
                position = match.end()
                break
        else:
            raise invalid(f"Invalid filter {text!r}: cannot read it from {text[position:position + 30]!r} on")


@dataclass
class Clause:
    entity: str
    key: str
    op: str
    value: object


def parse_filter(text: str, allowed=("attributes", "metrics", "params", "tags", "datasets"),
                 attributes=ATTRIBUTES) -> list[Clause]:
    clauses = []
    text = text.strip()
    parts = _tokens(text)
    group = []
    for match in parts + [None]:
        if match is None or match.group("and"):
            if len(group) == 2 and group[1].group("op") and _is_null_test(group[1].text):
                group.append(_Token("null", ""))
            if len(group) != 3:
                raise invalid(f"Invalid filter {text!r}: each clause is ENTITY.KEY OPERATOR VALUE, joined by AND")
            clauses.append(_clause(group, text, allowed, attributes))
            group = []
        else:
            group.append(match)
    return clauses


def _is_null_test(op: str) -> bool:
    return re.fullmatch(r"IS\s+(NOT\s+)?NULL", op, re.IGNORECASE) is not None


def _clause(group, text, allowed, attributes) -> Clause:
    ident, op, value = group
    if not ident.group("ident") or not op.group("op"):
        raise invalid(f"Invalid filter {text!r}: expected ENTITY.KEY OPERATOR VALUE")
    entity, dot, key = ident.group("ident").partition(".")
    if not dot:  # a bare key is an attribute (MLflow's SearchUtils._get_identifier)
        entity, key = "attributes", entity
    key = key.strip()
    if key[:1] in "`\"" and key[-1:] == key[:1]:
        key = key[1:-1]
    kind = ENTITIES.get(entity.lower())
    if kind is None or kind not in allowed:
        raise invalid(f"Invalid filter {text!r}: {entity!r} is not one of {', '.join(allowed)}")
    if kind == "attributes":
        key = ALIASES.get(key, key)
        if key not in attributes:
            raise invalid(f"Invalid attribute key '{key}' specified. Valid keys are '{set(attributes)}'")
    if kind == "datasets" and key not in DATASET_KEYS:
        raise invalid(f"Invalid dataset key '{key}' specified. Valid keys are '{set(DATASET_KEYS)}'")
    operator = re.sub(r"\s+", " ", op.group("op").upper())
    if operator in ("IS NULL", "IS NOT NULL"):
        if kind not in ("params", "tags"):
            raise invalid(f"Invalid filter {text!r}: IS NULL / IS NOT NULL is only supported for tags and params")
        return Clause(kind, key, operator, None)
    if value.group("string"):
        parsed = _unquote(value.group("string"))
    elif value.group("number"):
        parsed = float(value.group("number"))
    elif value.group("list") and operator in ("IN", "NOT IN"):
        parsed = [_unquote(v) for v in re.findall(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", value.group("list"))]
    else:
        raise invalid(f"Invalid filter {text!r}: a value is a quoted string, a number or, after IN, a list")
    if operator in ("IN", "NOT IN") and not isinstance(parsed, list):
        raise invalid(f"Invalid filter {text!r}: {operator} takes a list ('a', 'b')")
    if "LIKE" in operator and isinstance(parsed, str) and len(parsed) > MAX_PATTERN_LENGTH:
        raise invalid(f"Invalid filter: the {operator} pattern of {entity}.{key} is {len(parsed):,} characters long; a "
                      f"pattern may have at most {MAX_PATTERN_LENGTH}")
    if (kind == "metrics" or (kind == "attributes" and key in NUMERIC_ATTRIBUTES)) and not isinstance(parsed, float):
        if not (isinstance(parsed, str) and re.fullmatch(r"-?\d+", parsed.strip())):
            raise invalid(f"Invalid filter {text!r}: {entity}.{key} is compared with a number")
        parsed = float(parsed)
    return Clause(kind, key, operator, parsed)


def _unquote(token: str) -> str:
    return re.sub(r"\\(.)", r"\1", token[1:-1])


def _compare(op: str, have, want) -> bool:
    """MLflow's SearchUtils._does_run_match_clause: a missing value matches IS NULL and nothing else (`!=` too)."""
    if op in ("IS NULL", "IS NOT NULL"):
        return (have is None) == (op == "IS NULL")
    if have is None:
        return False
    if op in ("LIKE", "ILIKE", "NOT LIKE", "NOT ILIKE"):
        found = like(str(want), str(have), fold="ILIKE" in op)
        return not found if op.startswith("NOT") else found
    if op in ("IN", "NOT IN"):
        return (str(have) in want) == (op == "IN")
    if isinstance(want, float):
        try:
            have = float(have)
        except (TypeError, ValueError):
            return False
    elif not isinstance(have, str):
        have = str(have)
    return {"=": have == want, "!=": have != want, "<": have < want, "<=": have <= want, ">": have > want,
            ">=": have >= want}[op]


def matches(clauses: list[Clause], attributes: dict, metrics: dict, params: dict, tags: dict) -> bool:
    # a run trained elsewhere logs no datasets (runs/log-inputs is not kept): a datasets clause matches none
    sources = {"attributes": attributes, "metrics": metrics, "params": params, "tags": tags, "datasets": {}}
    return all(_compare(c.op, sources[c.entity].get(c.key), c.value) for c in clauses)


def _attributes(external: ExternalRun) -> dict:
    run = external.run
    return {"run_id": run.mlflow_run_id, "run_name": run.name, "status": STATUS_OF_STATE[run.state],
            "user_id": external.user_id, "start_time": external.start_time, "end_time": external.end_time,
            "lifecycle_stage": external.lifecycle_stage,
            "artifact_uri": f"{external.experiment.artifact_root}/{run.mlflow_run_id}/artifacts"}


def search_runs(found_experiments: list[Experiment], filter_text: str, view: str, order_by: list[str],
                max_results: int, page_token: str | None):
    """(the page of ExternalRuns, the next page's token or None)."""
    clauses = parse_filter(filter_text) if filter_text.strip() else []
    runs = ExternalRun.objects.select_related("run", "experiment").filter(experiment__in=found_experiments)
    if view != "ALL":
        runs = runs.filter(lifecycle_stage=Experiment.DELETED if view == "DELETED_ONLY" else Experiment.ACTIVE)
    runs = list(runs)
    orders = [_order(o) for o in order_by]
    needs_metrics = any(c.entity == "metrics" for c in clauses) or any(kind == "metrics" for kind, _, _ in orders)
    latest = logged_metrics.latest([e.pk for e in runs]) if needs_metrics else {}

    def values(external) -> dict:
        metrics = {name: value for name, (_, value, _) in latest.get(external.pk, {}).items()}
        tags = {**external.tags, "mlflow.runName": external.run.name}
        return {"attributes": _attributes(external), "metrics": metrics, "params": external.params, "tags": tags}

    sources = {e.pk: values(e) for e in runs}  # each run's values, read once for the filter and every order
    kept = [e for e in runs if matches(clauses, **sources[e.pk])]
    # MLflow's SQL store: the ordered fields, each with real values first, then NaN (metrics), then missing ones,
    # whichever the direction; then start_time DESC (unless ordered by it) and run_id
    kept.sort(key=lambda e: (-(e.start_time or 0), e.run.mlflow_run_id))
    for kind, key, descending in reversed(orders):
        value = {e.pk: sources[e.pk][kind].get(key) for e in kept}
        rank = {pk: 2 if v is None else 1 if isinstance(v, float) and math.isnan(v) else 0 for pk, v in value.items()}
        ranked = [e for e in kept if rank[e.pk] == 0]
        ranked.sort(key=lambda e: value[e.pk], reverse=descending)
        kept = ranked + sorted((e for e in kept if rank[e.pk]), key=lambda e: rank[e.pk])  # stable: ties keep order
    start = _offset(page_token)
    page = kept[start:start + max_results]
    more = start + max_results < len(kept)
    return page, (base64.urlsafe_b64encode(str(start + max_results).encode()).decode() if more else None)


def _order(text: str):
    parts = text.strip().rsplit(" ", 1)
    descending = len(parts) == 2 and parts[1].upper() == "DESC"
    field = parts[0] if len(parts) == 2 and parts[1].upper() in ("ASC", "DESC") else text.strip()
    entity, dot, key = field.partition(".")
    kind = ENTITIES.get(entity.lower()) if dot else "attributes"
    key = key if dot else field
    if key[:1] in "`\"" and key[-1:] == key[:1]:
        key = key[1:-1]
    key = ALIASES.get(key, key) if kind == "attributes" else key
    if kind not in ("attributes", "metrics", "params", "tags") or (kind == "attributes" and key not in ATTRIBUTES):
        raise invalid(f"Invalid order_by clause {text!r}: expected e.g. 'attributes.start_time DESC' or "
                      f"'metrics.`loss` ASC'")
    return kind, key, descending


def _offset(token: str | None) -> int:
    if not token:
        return 0
    try:
        return int(base64.urlsafe_b64decode(token.encode()).decode())
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise invalid(f"Invalid page token {token!r}") from None

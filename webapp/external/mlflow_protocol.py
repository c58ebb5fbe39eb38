"""MLflow's REST protocol as Evolab speaks it: its error answers, reading a request's fields, and the
JSON shapes of experiments, runs and metrics (mlflow/protos/service.proto, as the pinned client reads it).

Only this module knows MLflow's spellings; the actions (webapp/external/reporting.py) take and return
Evolab's objects."""
import json
import math

from django.http import JsonResponse

from webapp.plain_text import control_character, named, storable, unpaired_surrogate
from webapp.runs.models import Run

# MLflow's error codes and the HTTP statuses its server answers them with (mlflow/protos/databricks.proto)
STATUS = {
    "INVALID_PARAMETER_VALUE": 400,
    "BAD_REQUEST": 400,
    "MALFORMED_REQUEST": 400,
    "RESOURCE_ALREADY_EXISTS": 400,
    "INVALID_STATE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "RESOURCE_DOES_NOT_EXIST": 404,
    "ENDPOINT_NOT_FOUND": 404,
    "NOT_IMPLEMENTED": 501,
}

# MLflow's limits (mlflow/utils/validation.py), kept so a client that passes its own checks passes ours
MAX_METRICS_PER_BATCH = 1000
MAX_ENTITIES_PER_BATCH = 1000  # metrics, params and tags together
MAX_BATCH_LOG_REQUEST_SIZE = 1_000_000  # bytes of a log-batch's body
MAX_PARAMS_TAGS_PER_BATCH = 100
MAX_ENTITY_KEY_LENGTH = 250
MAX_PARAM_VALUE_LENGTH = 6000
MAX_TAG_VALUE_LENGTH = 8000
MAX_EXPERIMENT_NAME_LENGTH = 500
MAX_RUN_NAME_LENGTH = 200  # Run.name


class MlflowError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message

    def response(self) -> JsonResponse:
        return error_response(self.code, self.message)


def error_response(code: str, message: str) -> JsonResponse:
    return JsonResponse({"error_code": code, "message": message}, status=STATUS.get(code, 400))


def invalid_value(name: str, value, hint: str = "") -> MlflowError:
    """MLflow's words for a field of the wrong type or range (mlflow/utils/validation.py invalid_value): its own
    tests, and clients, match them."""
    shown = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return invalid(f"Invalid value {shown} for parameter '{name}' supplied." + (f" {hint}" if hint else ""))


def invalid(message: str) -> MlflowError:
    return MlflowError("INVALID_PARAMETER_VALUE", message)


def missing(message: str) -> MlflowError:
    return MlflowError("RESOURCE_DOES_NOT_EXIST", message)


# --- reading a request ---------------------------------------------------------------------------


def request_fields(request) -> dict:
    """A POST's JSON object, or a GET's query parameters (the client sends GETs' fields that way)."""
    if request.method == "GET":
        return {key: request.GET.get(key) for key in request.GET}
    if not request.body:
        return {}
    try:
        body = json.loads(request.body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MlflowError("MALFORMED_REQUEST", f"the request body is not JSON: {exc}") from None
    except RecursionError:
        raise MlflowError("MALFORMED_REQUEST", "the request body nests too deeply") from None
    if not isinstance(body, dict):
        raise MlflowError("MALFORMED_REQUEST", "the request body must be a JSON object")
    return body


def text(fields: dict, name: str, required: bool = True, max_length: int | None = None,
         free_text: bool = False) -> str | None:
    """A string field. A NUL is refused (PostgreSQL's text refuses it), and so is an unpaired surrogate (UTF-8 cannot
    hold it) in a name or an id; in `free_text` (a user id, like the tags' values) it becomes U+FFFD."""
    value = fields.get(name)
    if value in (None, ""):
        if required:
            raise invalid(f"Missing value for required parameter '{name}'.")
        return None
    if not isinstance(value, str):
        raise invalid_value(name, value)
    if "\x00" in value:
        raise invalid(f"Invalid value for parameter '{name}': it holds a NUL character.")
    surrogate = unpaired_surrogate(value)
    if surrogate is not None:
        if free_text:
            return storable(value)
        raise invalid(f"Invalid value for parameter '{name}': it holds {named(surrogate)}.")
    if max_length is not None and len(value) > max_length:
        raise invalid(f"Invalid value for parameter '{name}': {len(value)} characters, at most {max_length}.")
    return value


def whole(fields: dict, name: str, default=None, low: int | None = None, high: int | None = None):
    """An int64 field: a JSON number or the string of one (protobuf's JSON writes int64 as a string)."""
    value = fields.get(name)
    if value in (None, ""):
        return default
    if isinstance(value, bool):
        raise invalid_value(name, value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.lstrip("-").isdigit() and stripped.lstrip("-").isascii() and len(stripped) <= 20:
            value = int(stripped)
    if not isinstance(value, int):
        raise invalid_value(name, value)
    if low is not None and value < low:
        raise invalid_value(name, value, f"It must be at least {low}.")
    if high is not None and value > high:
        raise invalid_value(name, value, f"It must be at most {high}.")
    return value


NAN_WORDS = {"NaN": math.nan, "nan": math.nan, "Infinity": math.inf, "inf": math.inf, "-Infinity": -math.inf,
             "-inf": -math.inf}


def number(value, what: str) -> float:
    """A metric value: a JSON number, or NaN/Infinity as protobuf's JSON writes them (kept as missing)."""
    if isinstance(value, bool) or value is None:
        raise invalid(f"{what} is {json.dumps(value)}: a metric value must be a number")
    if isinstance(value, float):
        return value
    if isinstance(value, int):
        try:
            return float(value)
        except OverflowError:  # JSON reads an integer of any length whole
            raise invalid(f"{what} is an integer of {len(str(abs(value)))} digits, past the range of a 64-bit float "
                          f"(MLflow's metric values)") from None
    if isinstance(value, str):
        if value in NAN_WORDS:
            return NAN_WORDS[value]
        try:
            return float(value)
        except ValueError:
            pass
    raise invalid(f"{what} is {value!r}: a metric value must be a number")


def key_value_list(fields: dict, name: str, limit: int, max_value: int) -> list[tuple[str, str]]:
    """params/tags of a log-batch or create: [{key, value}] as (key, value) pairs, checked."""
    items = fields.get(name) or []
    if not isinstance(items, list):
        raise invalid_value(name, items)
    if len(items) > limit:
        raise batch_limit(name, limit, len(items))
    pairs = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise invalid(f"{name}[{i}] must be an object {{key, value}}.")
        key = entity_key(item.get("key"), f"{name}[{i}].key")
        value = item.get("value", "")
        if value is None:
            value = ""
        if not isinstance(value, str):  # a string field of MLflow's protos: its server refuses anything else
            raise invalid_value(f"{name}[{i}].value", value)
        if len(value) > max_value:
            raise invalid(f"{name}[{i}] '{key}' has a value of {len(value)} characters; at most {max_value}.")
        if "\x00" in value:
            raise invalid(f"{name}[{i}] '{key}' has a NUL character in its value.")
        # a value is any text (a path the trainer decoded with surrogateescape): kept, each unpaired surrogate as
        # U+FFFD, so the same value logged again reads the same
        pairs.append((key, storable(value)))
    return pairs


def batch_limit(entity: str, limit: int, length: int) -> MlflowError:
    """MLflow's words for a batch over its limits (mlflow/utils/validation.py _validate_batch_limit)."""
    return invalid(f"A batch logging request can contain at most {limit} {entity}. Got {length} {entity}. "
                   f"Please split up {entity} across multiple requests and try again.")


def entity_key(key, what: str) -> str:
    if not isinstance(key, str) or not key.strip():
        raise invalid(f"{what} must be a non-empty name, not {json.dumps(key) if not isinstance(key, str) else repr(key)}.")
    if len(key) > MAX_ENTITY_KEY_LENGTH:
        raise invalid(f"{what} '{key[:40]}...' is {len(key)} characters long; at most {MAX_ENTITY_KEY_LENGTH}.")
    bad = control_character(key)
    if bad is not None:
        raise invalid(f"{what} {key!a} holds {named(bad)}.")
    return key


# --- rendering -----------------------------------------------------------------------------------

# Evolab's run states as MLflow's RunStatus
STATUS_OF_STATE = {Run.QUEUED: "SCHEDULED", Run.PENDING: "SCHEDULED", Run.RUNNING: "RUNNING", Run.SUCCEEDED: "FINISHED",
                   Run.FAILED: "FAILED", Run.CANCELLED: "KILLED"}
STATE_OF_STATUS = {"SCHEDULED": Run.QUEUED, "RUNNING": Run.RUNNING, "FINISHED": Run.SUCCEEDED, "FAILED": Run.FAILED,
                   "KILLED": Run.CANCELLED}


def millis(moment) -> int | None:
    return int(moment.timestamp() * 1000) if moment else None


def tags_json(tags: dict) -> list[dict]:
    return [{"key": k, "value": v} for k, v in tags.items()]


def metric_json(key: str, value, timestamp_ms: int, step: int) -> dict:
    """One metric point as MLflow's Metric: NaN as protobuf's JSON writes it."""
    return {"key": key, "value": "NaN" if value is None or math.isnan(value) else value, "timestamp": timestamp_ms,
            "step": step}

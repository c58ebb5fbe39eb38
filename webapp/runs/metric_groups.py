"""Where the run and compare pages chart each metric: its group (a section of the page), its place in the
group, and the alert rules whose markers it carries. The one copy: the pages are sent `catalogue()` and
static/js/charts.js applies it to every name, those that first arrive live included; it holds no list of
names itself."""
from rl.methods import metric_prefixes
from webapp.alerts.rule_specs import RULES

# The sections of the pages, in display order (DESIGN §5 names).
GROUPS = ("health", "rewards", "labels & eval", "optimisation", "time", "other")
HEALTH = ("entropy", "response_length/mean", "similarity/mean", "majority_ratio", "unique_answers", "majority_flip_rate",
          "invalid_ratio", "truncated_ratio", "zero_variance_groups")
OPTIMISATION = ("kl", "loss", "grad_norm", "learning_rate", "entropy_loss", "policy_loss", "pg_loss", "kl_loss", "clip_ratio")

# A name's group is the first rule it meets: one of the names, or a name starting with one of the prefixes
# (a method's own metrics, `evol_rl/...`, are rewards); any other name is "other".
RULES_IN_ORDER = (
    ("health", HEALTH, ("response_length/", "similarity/")),
    ("rewards", ("reward",), ("reward/", *(f"{prefix}/" for prefix in metric_prefixes()))),
    ("labels & eval", ("label_accuracy", "reward_accuracy", "correct_to_wrong"), ("maj@", "pass@", "eval/")),
    ("optimisation", OPTIMISATION, ("clip_ratio/", "kl/", "loss/", "grad_norm/", "optim/", "updates/")),
    ("time", (), ("time/",)),
)

# Display order inside a group (DESIGN §5's order); other names follow alphabetically.
ORDER = (*HEALTH, "reward/mean", "reward/std", "reward/vote_mean", "reward/vote_std", "label_accuracy",
         "reward_accuracy", "correct_to_wrong", "maj@16", "pass@1", "pass@16", "kl", "loss", "grad_norm", "learning_rate", "clip_ratio/low",
         "clip_ratio/high", "time/step", "time/generation", "time/reward", "time/update")


def catalogue() -> dict:
    """What charts.js needs to place any metric: the groups, the rules, the order, and for each alert rule the
    metrics it reads (its marker goes on those charts; a rule that reads none, stalled or run_failed, marks
    every chart)."""
    return {
        "groups": list(GROUPS),
        "rules": [{"group": group, "names": list(names), "prefixes": list(prefixes)}
                  for group, names, prefixes in RULES_IN_ORDER],
        "order": list(ORDER),
        "rule_metrics": {kind: list(spec.metrics) for kind, spec in RULES.items() if spec.metrics},
    }

"""manage.py backtest: replay the alert rules, with any thresholds, over runs that already happened, and say when each
would have opened (webapp/alerts/backtest.py). Over the labelled corpus it also scores each rule: the collapses it
caught and how soon after their onset, and its false alarms on the runs that did not collapse."""
from django.core.management.base import BaseCommand, CommandError

from rl.params import FieldError
from webapp.accounts.models import Team
from webapp.alerts import backtest, corpus, past_runs
from webapp.alerts.engine import team_overrides
from webapp.alerts.rule_specs import STEP_RULE_KINDS
from webapp.runs.models import Run


class Command(BaseCommand):
    help = ("Replay the alert rules over past runs: the labelled corpus (the default), or a team's runs (--team), "
            "with the defaults, the team's thresholds and --set KIND.PARAM=VALUE on top.")

    def add_arguments(self, parser):
        parser.add_argument("--corpus", nargs="*", metavar="NAME", help="corpus runs (all when none is named)")
        parser.add_argument("--team", help="a team's runs (its id or name), with its thresholds")
        parser.add_argument("--run", nargs="*", type=int, default=[], metavar="ID", help="only these of the team's runs")
        parser.add_argument("--rule", nargs="*", default=list(STEP_RULE_KINDS), metavar="KIND", help="rules to replay")
        parser.add_argument("--set", nargs="*", default=[], metavar="KIND.PARAM=VALUE", help="thresholds to try")

    def handle(self, *args, **options):
        kinds = tuple(options["rule"])
        unknown = sorted(set(kinds) - set(STEP_RULE_KINDS))
        if unknown:
            raise CommandError(f"--rule {unknown[0]}: expected one of {', '.join(STEP_RULE_KINDS)}")
        layers = []
        if options["team"]:
            team = Team.objects.filter(pk=int(options["team"])).first() if options["team"].isdigit() else \
                Team.objects.filter(name=options["team"]).first()
            if team is None:
                raise CommandError(f"no team {options['team']!r}")
            layers.append(team_overrides(team.pk))
            runs = Run.objects.filter(team=team).order_by("pk")
            if options["run"]:
                runs = runs.filter(pk__in=options["run"])
                missing = sorted(set(options["run"]) - set(runs.values_list("pk", flat=True)))
                if missing:
                    raise CommandError(f"--run {missing[0]}: no such run in team {team.name}")
            trajectories = [past_runs.trajectory_of(run) for run in runs]
        else:
            names = options["corpus"] or corpus.names()
            missing = sorted(set(names) - set(corpus.names()))
            if missing:
                raise CommandError(f"--corpus {missing[0]}: no such corpus run")
            trajectories = backtest.corpus_trajectories(names)
        try:
            thresholds = backtest.with_thresholds(layers, options["set"])
        except FieldError as exc:
            raise CommandError(f"--set: {exc.message}") from None
        replayed = [(t, backtest.replay(t, thresholds, kinds)) for t in trajectories]
        width = max((len(t.name) for t, _ in replayed), default=10)
        for trajectory, openings in replayed:
            label = f"{trajectory.label} at {trajectory.onset}" if trajectory.onset else (trajectory.label or "")
            opened = "; ".join(f"{rule} {backtest.spans(found)}"
                               for rule, found in backtest.openings_by_rule(openings).items()) or "no alert"
            self.stdout.write(f"{trajectory.name:<{width}}  {label:<18}  {opened}")
        if any(t.label for t, _ in replayed):
            self.stdout.write("")
            self.stdout.write(score_table(backtest.score(replayed, kinds), backtest.any_collapse_rule(replayed)))


def score_table(scores: dict, together) -> str:
    """The labelled runs' verdict per rule, as the benchmark prints it."""
    lines = [f"{'rule':<22} {'caught':>7} {'in time':>8} {'median delay':>13} {'false alarms':>13}"]
    for score in [*scores.values(), together]:
        delay = "—" if score.median_delay is None else f"{score.median_delay:+g}"
        lines.append(f"{score.rule:<22} {score.caught:>3}/{score.collapses:<3} {score.in_time:>8} {delay:>13} "
                     f"{score.false_alarm_count:>6}/{score.negative_count:<6}")
    return "\n".join(lines)

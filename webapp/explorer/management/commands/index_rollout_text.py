from django.core.management.base import BaseCommand, CommandError

from webapp.explorer import text_search
from webapp.runs.models import Run


class Command(BaseCommand):
    help = ("Index the rollout texts not indexed yet for the search's q (all runs, or the given ids). "
            "Live runs are indexed by their supervisor; this is for runs stored before the index existed.")

    def add_arguments(self, parser):
        parser.add_argument("run_ids", nargs="*", type=int)

    def handle(self, run_ids, **options):
        runs = list(Run.objects.filter(pk__in=run_ids).values_list("pk", flat=True)) if run_ids else \
            list(Run.objects.values_list("pk", flat=True))
        missing = sorted(set(run_ids) - set(runs))
        if missing:
            raise CommandError(f"no run with id {missing[0]}")
        for run_id in runs:
            done = text_search.catch_up_fully(run_id)
            if done:
                self.stdout.write(f"run {run_id}: indexed {done} rollout texts")

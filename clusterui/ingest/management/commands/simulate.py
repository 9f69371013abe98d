import time

from django.core.management.base import BaseCommand, CommandError

from clusterui.ingest.simulate import simulated_cluster


class Command(BaseCommand):
    help = ("Store the history of a SIMULATED cluster (the real collector code on the NVML "
            "simulator) directly in the database, on a virtual clock: test and benchmark data.")

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=16)
        parser.add_argument("--gpus", type=int, default=8)
        parser.add_argument("--hours", type=float, default=2.0)
        parser.add_argument("--interval", type=float, default=10.0)
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--cluster", default="demo")
        parser.add_argument("--end", type=float, default=None,
                            help="Unix time the history ends at (default: now)")

    def handle(self, *args, **o):
        if o["nodes"] < 1 or o["hours"] <= 0 or not 1 <= o["interval"] <= 3600:
            raise CommandError("--nodes must be >= 1, --hours > 0, --interval in [1, 3600]")
        began = time.perf_counter()
        sim, counts = simulated_cluster(
            nodes=o["nodes"], gpus=o["gpus"], hours=o["hours"], end=o["end"] or time.time(),
            seed=o["seed"], interval=o["interval"], cluster=o["cluster"],
        )
        self.stdout.write(
            f"simulated {o['nodes']} nodes x {o['gpus']} GPUs for {o['hours']:g} h: "
            f"{counts['batches']} batches, {counts['gpu_samples']} GPU samples, "
            f"{len(sim.jobs)} jobs, in {time.perf_counter() - began:.1f} s"
        )

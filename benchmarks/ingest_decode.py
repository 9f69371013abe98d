#!/usr/bin/env python
"""Decoding and validating one sealed batch, in process: a version-2 batch's signed text
read plainly (``messages.loads``) or with typed rows (``typed_decode.decode``), then
``validate_batch``, per batch size, the two alternated in the same process.

    python benchmarks/ingest_decode.py [--sizes 1 3 6 12 125] [--rounds 5]

A size is samples per device of a node-shaped batch (``tests.factories.node_batch``: 8
GPUs, 4 InfiniBand ports, one job): 1 is a node's 10 s batch (8 GPU rows, about 3 kB,
under ``typed_decode.TYPED_FROM_BYTES``, where ``decode`` itself reads it plainly), 125 a
back-fill's 1,000 GPU rows. The text is what a collector seals (``signing.seal``). Printed
per size: the text's size, microseconds per batch for each decoding (the median of
``--rounds`` rounds, each the best of three timings of a loop), and the typed decoding's
share of the plain one. No database, no queue: the figure is the consumer's CPU per batch
for this step alone (the ingest benchmarks measure it inside the flush).
"""

import argparse
import os
import statistics
import sys
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterui.settings")
os.environ.setdefault("DEBUG", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 3, 6, 12, 125],
                        help="samples per device")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import django

    django.setup()
    from clusterui.ingest import messages, typed_decode
    from clusterui.ingest.validate import validate_batch
    from collectors import signing
    from tests.factories import node_batch

    ways = {"plain": messages.loads,
            "typed": lambda text: typed_decode.decode(text, messages.loads)}
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'GPU rows':>8} {'text':>9} {'plain us':>9} {'typed us':>9} {'typed/plain':>11}")
    for size in args.sizes:
        now = time.time()
        sealed = signing.seal(node_batch(samples=size, gpus=8, nics=4, start=now - size * 10),
                              "bench-1", "bench-secret")
        text = sealed[signing.BODY]
        for decode in ways.values():  # the same validated rows either way, and none refused
            batch = validate_batch(decode(text), now=now)
            if len(batch.gpu_rows) != 8 * size or batch.rejected:
                raise SystemExit(f"size {size}: {len(batch.gpu_rows)} rows, "
                                 f"{dict(batch.rejected)} refused")
        number = max(10, 20_000 // (8 * size))
        figures = {name: [] for name in ways}
        for r in range(args.rounds):
            for name in (ways if r % 2 == 0 else reversed(ways)):
                def once(decode=ways[name], text=text, now=now):
                    return validate_batch(decode(text), now=now)

                best = min(timeit.repeat(once, number=number, repeat=3))
                figures[name].append(best / number * 1e6)
        plain, typed = (statistics.median(figures[n]) for n in ways)
        print(f"{8 * size:>8} {len(text):>8,}B {plain:>9,.0f} {typed:>9,.0f} "
              f"{typed / plain:>11.2f}")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

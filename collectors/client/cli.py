"""``clusterui``: the user's command line to a ClusterUI server, over its JSON API.

    clusterui jobstats JOBID [--cluster NAME] [--json]

The server: ``--url`` or ``CLUSTERUI_URL``. The API token (made on the server's
"API tokens" page): ``--token-file FILE``, else ``CLUSTERUI_TOKEN``, else the file
``~/.config/clusterui/token``.

Exit codes: 0 the report was printed; 2 a usage or configuration error (no URL, no token,
a job id on several clusters without ``--cluster``); 3 no such job that you may see;
4 the server could not be reached or answered with another error; 5 the token was refused.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from collectors.client import jobstats
from collectors.client.api import ApiError, Client, Unreachable

OK, USAGE, NOT_FOUND, SERVER, AUTH = 0, 2, 3, 4, 5
DEFAULT_TOKEN_FILE = "~/.config/clusterui/token"


class UsageError(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clusterui", description="ClusterUI from the command line, over its JSON API.",
        epilog="Exit codes: 0 ok, 2 usage or configuration, 3 job not found (or not yours), "
               "4 server unreachable or another API error, 5 token refused.")
    parser.add_argument("--url", help="the server, e.g. https://clusterui.example.org "
                                      "(default: $CLUSTERUI_URL)")
    parser.add_argument("--token-file", metavar="FILE",
                        help="file holding your API token (default: $CLUSTERUI_TOKEN, "
                             f"else {DEFAULT_TOKEN_FILE})")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="S",
                        help="seconds to wait for the server (default 30)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    stats = commands.add_parser("jobstats", help="a job's efficiency, GPUs and findings",
                                description=jobstats.__doc__.split("\n\n")[0])
    stats.add_argument("job_id", metavar="JOBID", help="the scheduler's job id")
    stats.add_argument("--cluster", help="the cluster, where the id exists on several")
    stats.add_argument("--scheduler", choices=("slurm", "kubernetes"),
                       help="the scheduler, where one cluster has the id under both")
    stats.add_argument("--json", action="store_true",
                       help="print the API's job detail and its GPU series as JSON")
    stats.add_argument("--width", type=int, default=jobstats.WIDTH,
                       help=f"sparkline columns (default {jobstats.WIDTH})")
    stats.add_argument("--ascii", action="store_true", help="ASCII sparklines")
    return parser


def _url(args, env) -> str:
    url = args.url or env.get("CLUSTERUI_URL", "")
    if not url:
        raise UsageError("no server: give --url or set CLUSTERUI_URL")
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--url: expected http:// or https://, got {url!r}")
    return url


def _token(args, env) -> str:
    if args.token_file:
        source = args.token_file
    elif env.get("CLUSTERUI_TOKEN"):
        return env["CLUSTERUI_TOKEN"].strip()
    else:
        source = DEFAULT_TOKEN_FILE
    path = Path(source).expanduser()
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise UsageError(f"cannot read the token file {str(path)!r}: {exc.strerror}; make a "
                         "token on the server's API tokens page and save it there, or set "
                         "CLUSTERUI_TOKEN") from None
    if not token:
        raise UsageError(f"the token file {str(path)!r} is empty")
    return token


def main(argv=None, env=None) -> int:
    env = os.environ if env is None else env
    parser = _parser()
    args = parser.parse_args(argv)  # exits 2 on a usage error
    try:
        if args.width < 10:
            raise UsageError("--width: at least 10")
        client = Client(_url(args, env), _token(args, env), timeout=args.timeout)
        report = jobstats.collect(client, args.job_id, cluster=args.cluster,
                                  scheduler=args.scheduler)
    except UsageError as exc:
        return _fail(USAGE, str(exc))
    except jobstats.Ambiguous as exc:
        return _fail(USAGE, str(exc))
    except jobstats.NotFound as exc:
        return _fail(NOT_FOUND, str(exc))
    except Unreachable as exc:
        return _fail(SERVER, f"server unreachable: {exc}")
    except ApiError as exc:
        if exc.status in (401, 403):
            return _fail(AUTH, f"the server refused the token ({exc.status}: {exc}); make a "
                               "new one on its API tokens page")
        if exc.status == 404:  # the job went away between the two requests
            return _fail(NOT_FOUND, f"job {args.job_id!r}: {exc}")
        return _fail(SERVER, f"the server answered {exc.status}: {exc}")
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        ascii_only = args.ascii or not _can_print(jobstats.SPARK)
        sys.stdout.write(jobstats.render(report, width=args.width, ascii_only=ascii_only))
    return OK


def _can_print(text: str) -> bool:
    try:
        text.encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _fail(code: int, message: str) -> int:
    print(f"clusterui: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())

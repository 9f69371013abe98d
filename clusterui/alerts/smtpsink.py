"""A local SMTP server that keeps every message it receives in a Maildir: the demo's mail
server (``make demo``), readable at /demo/mail/ or with any Maildir client.

    python -m clusterui.alerts.smtpsink --port 1025 --maildir var/mail

It accepts mail for any address and relays nothing. Each message gets an ``X-Envelope-To``
header listing the SMTP recipients, so Bcc recipients can find theirs too.
"""

import argparse
import mailbox
import signal
import threading
from pathlib import Path

from aiosmtpd.controller import Controller


class MaildirHandler:
    def __init__(self, path: Path):
        for sub in ("tmp", "new", "cur"):  # Maildir(create=True) skips an existing folder
            (path / sub).mkdir(parents=True, exist_ok=True)
        self.maildir = mailbox.Maildir(path, create=False)

    async def handle_DATA(self, server, session, envelope):
        trace = (f"X-Envelope-From: {envelope.mail_from}\r\n"
                 f"X-Envelope-To: {', '.join(envelope.rcpt_tos)}\r\n").encode()
        self.maildir.add(trace + envelope.original_content)
        return "250 Message accepted for delivery"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=1025)
    parser.add_argument("--maildir", type=Path, default=Path("var/mail"))
    args = parser.parse_args(argv)
    controller = Controller(MaildirHandler(args.maildir), hostname=args.host, port=args.port)
    controller.start()
    print(f"SMTP sink on {args.host}:{args.port}, keeping mail in {args.maildir}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    controller.stop()


if __name__ == "__main__":
    main()

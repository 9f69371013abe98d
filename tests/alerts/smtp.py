"""A real SMTP server for the tests (aiosmtpd on a free port, in a thread of the test
process): workers and the code under test talk to it over TCP like to any mail server."""

import asyncio
import email
import email.policy
import logging
import threading
from dataclasses import dataclass

from aiosmtpd.controller import Controller

from tests.services import free_port

logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd logs every command


@dataclass
class Received:
    envelope_from: str
    envelope_to: list[str]
    message: email.message.EmailMessage

    @property
    def subject(self) -> str:
        return str(self.message["Subject"])

    @property
    def text(self) -> str:
        return self.message.get_body(("plain",)).get_content()

    @property
    def html(self) -> str:
        return self.message.get_body(("html",)).get_content()


class SmtpServer:
    """``delay_s`` slows every DATA (to make concurrent senders overlap); ``refuse`` answers
    550 for those recipients; ``fail_data`` answers ``fail_reply`` to that many DATA commands
    first."""

    def __init__(self, port: int | None = None, *, delay_s: float = 0.0, refuse=(),
                 fail_data: int = 0, fail_reply: str = "451 4.3.0 Try again later"):
        self.port = port or free_port()
        self.delay_s = delay_s
        self.refuse = {a.lower() for a in refuse}
        self.fail_data = fail_data
        self.fail_reply = fail_reply
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self.controller: Controller | None = None

    # aiosmtpd handler hooks
    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        if address.lower() in self.refuse:
            return "550 5.1.1 No such user here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        with self._lock:
            if self.fail_data > 0:
                self.fail_data -= 1
                return self.fail_reply
            message = email.message_from_bytes(envelope.original_content,
                                               policy=email.policy.default)
            self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), message))
        return "250 Message accepted for delivery"

    def start(self) -> "SmtpServer":
        self.controller = Controller(self, hostname="127.0.0.1", port=self.port)
        self.controller.start()
        return self

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    def to(self, address: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if address in r.envelope_to]

    def count(self) -> int:
        with self._lock:
            return len(self.received)

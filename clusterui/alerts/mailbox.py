"""The demo's mailbox: the Maildir that ``smtpsink`` writes, read for the /demo/mail/ pages.
Staff see every message; anyone else sees the messages addressed to them."""

import email
import email.policy
import mailbox
from dataclasses import dataclass
from email.utils import getaddresses, parsedate_to_datetime
from pathlib import Path

from django.conf import settings

from clusterui.alerts.recipients import address_of, normalize

MAX_LISTED = 300


@dataclass
class Mail:
    key: str
    date: object
    sender: str
    to: list[str]
    subject: str
    message: email.message.EmailMessage

    @property
    def text(self) -> str:
        part = self.message.get_body(("plain",))
        return part.get_content() if part is not None else ""

    @property
    def html(self) -> str:
        part = self.message.get_body(("html",))
        return part.get_content() if part is not None else ""

    @property
    def html_for_frame(self) -> str:
        """The HTML part with its links opening in a new tab (the frame is sandboxed)."""
        return '<base target="_blank">' + self.html if self.html else ""

    @property
    def headers(self) -> list[tuple[str, str]]:
        return [(k, str(v)) for k, v in self.message.items()]


def _maildir() -> mailbox.Maildir | None:
    path = Path(settings.DEMO_MAILBOX_DIR)
    if not (path / "new").is_dir():
        return None  # the sink has not received anything yet
    return mailbox.Maildir(path, factory=None, create=False)


def _parse(key: str, raw: bytes) -> Mail:
    message = email.message_from_bytes(raw, policy=email.policy.default)
    to = [normalize(a) for _, a in getaddresses(
        [str(v) for h in ("To", "Cc", "X-Envelope-To") for v in message.get_all(h, [])]) if a]
    try:
        date = parsedate_to_datetime(str(message["Date"]))
    except (TypeError, ValueError):
        date = None
    return Mail(key=key, date=date, sender=str(message["From"] or ""),
                to=sorted(set(to)), subject=str(message["Subject"] or "(no subject)"),
                message=message)


def _may_read(user, mail: Mail) -> bool:
    return user.is_staff or address_of(user) in mail.to


def visible_messages(user) -> list[Mail]:
    """The newest messages first (Maildir keys start with the delivery time)."""
    box = _maildir()
    if box is None:
        return []
    mails = []
    for key in sorted(box.keys(), reverse=True)[: MAX_LISTED * 4]:
        try:
            mail = _parse(key, box.get_bytes(key))
        except KeyError:
            continue  # removed while we listed
        if _may_read(user, mail):
            mails.append(mail)
            if len(mails) == MAX_LISTED:
                break
    return mails


def visible_message(user, key: str) -> Mail | None:
    box = _maildir()
    if box is None:
        return None
    try:
        mail = _parse(key, box.get_bytes(key))
    except (KeyError, FileNotFoundError):
        return None
    return mail if _may_read(user, mail) else None

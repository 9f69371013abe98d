import json
import os

import pytest

from collectors.transport import Shipper, Spool


def batch(seq, sent_at=None, pad=0):
    return {"schema": 1, "sent_at": sent_at if sent_at is not None else 1000.0 + seq,
            "agent": {"boot_id": "b00t", "seq": seq, "spool_dropped": 0}, "pad": "x" * pad}  # fmt: skip


class Sender:
    def __init__(self, fail_after=None):
        self.sent = []
        self.fail_after = fail_after  # raise once this many batches were sent
        self.down = False

    def send(self, b):
        if self.down or (self.fail_after is not None and len(self.sent) >= self.fail_after):
            raise ConnectionError("broker down")
        self.sent.append(json.loads(json.dumps(b)))


def seqs(batches):
    return [b["agent"]["seq"] for b in batches]


def test_order_and_restart_survival(tmp_path):
    spool = Spool(str(tmp_path), 1_000_000)
    for seq in (3, 1, 2):
        spool.put(batch(seq))
    assert len(spool) == 3
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".tmp")]
    again = Spool(str(tmp_path), 1_000_000)  # a new process
    sender = Sender()
    assert again.replay(sender) == 3
    assert seqs(sender.sent) == [1, 2, 3]
    assert len(again) == 0


def test_bound_drops_oldest_and_counts(tmp_path):
    one = len(json.dumps(batch(1, pad=1000), separators=(",", ":")))
    spool = Spool(str(tmp_path), one * 3 + 10)
    for seq in range(1, 6):
        spool.put(batch(seq, pad=1000))
    assert spool.total_bytes() <= one * 3 + 10
    assert spool.dropped == 2
    sender = Sender()
    spool.replay(sender)
    assert seqs(sender.sent) == [3, 4, 5]
    assert Spool(str(tmp_path), one * 3 + 10).dropped == 2  # the count survives a restart


def test_replay_stops_at_first_failure(tmp_path):
    spool = Spool(str(tmp_path), 1_000_000)
    for seq in range(1, 5):
        spool.put(batch(seq))
    sender = Sender(fail_after=2)
    assert spool.replay(sender) == 2
    assert seqs(sender.sent) == [1, 2]
    sender.fail_after = None
    assert spool.replay(sender) == 2
    assert seqs(sender.sent) == [1, 2, 3, 4]


def test_shipper_spools_on_failure_and_keeps_order(tmp_path):
    spool = Spool(str(tmp_path), 1_000_000)
    sender = Sender()
    shipper = Shipper(sender, spool)
    assert shipper.ship(batch(1)) is True
    sender.down = True
    assert shipper.ship(batch(2)) is False
    assert shipper.ship(batch(3)) is False
    sender.down = False
    assert shipper.ship(batch(4)) is True
    assert seqs(sender.sent) == [1, 2, 3, 4]
    assert len(spool) == 0


def test_drops_reported_in_next_sent_batch(tmp_path):
    one = len(json.dumps(batch(1), separators=(",", ":")))
    spool = Spool(str(tmp_path), one * 2 + 5)
    sender = Sender()
    shipper = Shipper(sender, spool)
    sender.down = True
    for seq in range(1, 5):
        shipper.ship(batch(seq))  # 4 batches, room for 2: the 2 oldest are dropped
    sender.down = False
    shipper.ship(batch(5))
    assert seqs(sender.sent) == [4, 5]  # 3 was dropped when 5 was queued behind it
    assert [b["agent"]["spool_dropped"] for b in sender.sent] == [3, 0]
    assert spool.dropped == 0


def test_unwritable_spool_dir_names_the_key(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError, match="spool_dir"):
        Spool(str(blocker / "sub"), 1000)

"""Build trees shaped like the kernel's sysfs/procfs/cgroupfs (under tmp_path) for tests."""

from __future__ import annotations

import os


def write(path, text) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write(text if text.endswith("\n") or text == "" else text + "\n")


def add_ib_port(sysfs, dev, port, *, xmit, rcv, rate="400 Gb/sec (4X NDR)",
                link_layer="InfiniBand", state="4: ACTIVE", lid="0x12"):  # fmt: skip
    """/sys/class/infiniband/<dev>/ports/<port>/ (counters count octets / 4)."""
    pdir = os.path.join(sysfs, "class", "infiniband", dev, "ports", str(port))
    write(os.path.join(pdir, "rate"), rate)
    write(os.path.join(pdir, "state"), state)
    write(os.path.join(pdir, "phys_state"), "5: LinkUp")
    write(os.path.join(pdir, "link_layer"), link_layer)
    write(os.path.join(pdir, "lid"), lid)
    set_ib_counters(sysfs, dev, port, xmit=xmit, rcv=rcv)


def set_ib_counters(sysfs, dev, port, *, xmit, rcv) -> None:
    cdir = os.path.join(sysfs, "class", "infiniband", dev, "ports", str(port), "counters")
    write(os.path.join(cdir, "port_xmit_data"), str(xmit))
    write(os.path.join(cdir, "port_rcv_data"), str(rcv))
    write(os.path.join(cdir, "port_xmit_packets"), "0")
    write(os.path.join(cdir, "port_rcv_packets"), "0")


def add_netdev(sysfs, name, *, rx, tx, speed="25000", physical=True) -> None:
    """/sys/class/net/<if>/ with a 'device' link when the interface is physical."""
    idir = os.path.join(sysfs, "class", "net", name)
    os.makedirs(os.path.join(idir, "statistics"), exist_ok=True)
    if physical:
        target = os.path.join(sysfs, "devices", "pci0000:00", "0000:00:03.0")
        os.makedirs(target, exist_ok=True)
        os.symlink(target, os.path.join(idir, "device"))
    write(os.path.join(idir, "speed"), speed)
    write(os.path.join(idir, "operstate"), "up")
    set_netdev_counters(sysfs, name, rx=rx, tx=tx)


def set_netdev_counters(sysfs, name, *, rx, tx) -> None:
    sdir = os.path.join(sysfs, "class", "net", name, "statistics")
    write(os.path.join(sdir, "rx_bytes"), str(rx))
    write(os.path.join(sdir, "tx_bytes"), str(tx))


def add_process(procfs, pid, cgroup_text, environ: dict | None = None) -> None:
    write(os.path.join(procfs, str(pid), "cgroup"), cgroup_text)
    if environ is not None:
        data = b"".join(f"{k}={v}".encode() + b"\0" for k, v in environ.items())
        with open(os.path.join(procfs, str(pid), "environ"), "wb") as fh:
            fh.write(data)


def set_ib_errors(sysfs, dev, port, **counters) -> None:
    """ports/<port>/counters/<error counter> as the kernel prints them ("%u\\n")."""
    cdir = os.path.join(sysfs, "class", "infiniband", dev, "ports", str(port), "counters")
    for name, value in counters.items():
        write(os.path.join(cdir, name), str(value))


def set_hw_counters(sysfs, dev, port, **counters) -> None:
    """ports/<port>/hw_counters/<name> (mlx5 RoCE congestion and q counters, "%llu\\n")."""
    hdir = os.path.join(sysfs, "class", "infiniband", dev, "ports", str(port), "hw_counters")
    for name, value in counters.items():
        write(os.path.join(hdir, name), str(value))


def set_link(sysfs, dev, port, *, rate=None, state=None, phys_state=None) -> None:
    """rate ("100 Gb/sec (4X EDR)"), state ("4: ACTIVE"), phys_state ("5: LinkUp")."""
    pdir = os.path.join(sysfs, "class", "infiniband", dev, "ports", str(port))
    for name, value in (("rate", rate), ("state", state), ("phys_state", phys_state)):
        if value is not None:
            write(os.path.join(pdir, name), value)

"""Who owns the other end of a loopback TCP connection: the uid the kernel keeps on its socket.

The swap proxy's second guard (the first is the run's secret in the URL): a connection whose socket
belongs to another user is refused even if that user learnt the secret. Asked of the kernel with one
sock_diag netlink request for that exact socket (about 15 microseconds; reading /proc/net/tcp costs
milliseconds on a busy machine). Linux only; elsewhere, or when the socket is not found (another
network namespace), the owner is unknown and the secret alone decides.
"""

from __future__ import annotations

import socket
import struct

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
NO_COOKIE = 0xFFFFFFFF
ALL_STATES = 0xFFFFFFFF
UID_OFFSET = 16 + 4 + 48 + 12  # nlmsghdr, inet_diag_msg head, sockid, expires/rqueue/wqueue


def _request(peer: tuple[str, int], local: tuple[str, int]) -> bytes:
    """An inet_diag_req_v2 for the one TCP socket whose source is ``peer`` and destination ``local``."""
    sockid = (
        struct.pack("!HH", peer[1], local[1])
        + socket.inet_aton(peer[0]).ljust(16, b"\0")
        + socket.inet_aton(local[0]).ljust(16, b"\0")
        + struct.pack("=III", 0, NO_COOKIE, NO_COOKIE)  # any interface; no cookie check
    )
    req = struct.pack("=BBBBI", socket.AF_INET, socket.IPPROTO_TCP, 0, 0, ALL_STATES) + sockid
    return struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0) + req


def owner_uid(peer: tuple[str, int], local: tuple[str, int]) -> int | None:
    """The uid holding the socket that connects from ``peer`` to our ``local`` address, or None."""
    try:
        message = _request(peer, local)
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as nl:
            nl.settimeout(1.0)
            nl.send(message)
            data = nl.recv(8192)
        _length, kind = struct.unpack_from("=IH", data)
        if kind == NLMSG_ERROR:  # no such socket (or the request was refused)
            return None
        return int(struct.unpack_from("=I", data, UID_OFFSET)[0])
    except (OSError, AttributeError, ValueError, struct.error):  # not Linux, not IPv4, no netlink
        return None

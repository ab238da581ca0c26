#!/usr/bin/env python3
"""Readiness probe for the local Kafka broker: sends one Metadata request
(v4, the oldest version Kafka 4.x accepts) and succeeds when the broker
answers with at least one broker and an active controller.

Usage: kafka-ready.py HOST:PORT   (exit 0 ready, 1 not ready)
"""
import socket
import struct
import sys


def read_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        buf += chunk
    return buf


def metadata(host, port, timeout=3.0):
    client_id = b"sluice-ready"
    # Request header v1: api_key=3 (Metadata), api_version=4, correlation_id, client_id.
    header = struct.pack(">hhih", 3, 4, 7, len(client_id)) + client_id
    # Metadata v4 body: topics=[] (empty: no topic data needed), allow_auto_topic_creation=false.
    body = struct.pack(">i?", 0, False)
    req = header + body
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        s.sendall(struct.pack(">i", len(req)) + req)
        size = struct.unpack(">i", read_exact(s, 4))[0]
        resp = read_exact(s, size)
    off = 0
    corr, throttle = struct.unpack_from(">ii", resp, off)
    off += 8
    if corr != 7:
        raise ValueError("unexpected correlation id %d" % corr)
    nbrokers = struct.unpack_from(">i", resp, off)[0]
    off += 4
    brokers = []
    for _ in range(nbrokers):
        node_id, hlen = struct.unpack_from(">ih", resp, off)
        off += 6
        bhost = resp[off:off + hlen].decode()
        off += hlen
        bport = struct.unpack_from(">i", resp, off)[0]
        off += 4
        rlen = struct.unpack_from(">h", resp, off)[0]
        off += 2 + max(rlen, 0)
        brokers.append((node_id, bhost, bport))
    clen = struct.unpack_from(">h", resp, off)[0]
    off += 2
    cluster = resp[off:off + clen].decode() if clen >= 0 else None
    off += max(clen, 0)
    controller = struct.unpack_from(">i", resp, off)[0]
    return brokers, cluster, controller


def main():
    if len(sys.argv) != 2 or ":" not in sys.argv[1]:
        print("usage: kafka-ready.py HOST:PORT", file=sys.stderr)
        return 2
    host, port = sys.argv[1].rsplit(":", 1)
    try:
        brokers, cluster, controller = metadata(host, int(port))
    except (OSError, ValueError, struct.error) as e:
        print("kafka %s not ready: %s" % (sys.argv[1], e), file=sys.stderr)
        return 1
    if not brokers or controller < 0:
        print("kafka %s not ready: brokers=%s controller=%d" % (sys.argv[1], brokers, controller), file=sys.stderr)
        return 1
    print("kafka %s ready: cluster %s, brokers %s, controller %d" % (sys.argv[1], cluster, brokers, controller))
    return 0


if __name__ == "__main__":
    sys.exit(main())

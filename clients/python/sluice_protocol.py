"""A small client of Sluice's consumer protocol (docs/protocol.md), in Python.

It reads a loop's RATE, keeps the consumer instance's lease with its report
of what it stored, counts the live instances, and paces by the instance's
share of the rate. It needs boto3 only:

    import boto3, sluice_protocol as sp
    table = boto3.resource("dynamodb").Table("sluice")
    pacer = sp.Pacer(table, "orders", safe_rate=10)
    while True:
        msgs = receive()            # your queue
        pacer.wait(len(msgs))       # the instance's share of RATE
        store_then_ack(msgs)        # your destination
        pacer.stored(len(msgs))     # the lease carries the count
    pacer.close()

Times are RFC 3339 strings in UTC; counts are whole numbers; the protocol's
version is RATE's `v` (absent: 1). A consumer writes the newest lease layout
that both it and the controller know (LATEST_LAYOUT and RATE's `v`).
"""

import datetime as _dt
import os
import threading
import time

VERSION = 2
LATEST_LAYOUT = 2
LEASE_EVERY = 2.0  # seconds between two refreshes of the lease
LEASE_TTL = 15.0  # seconds a lease lives after a refresh
LIVE_BUCKET = 7  # seconds: the width of a live-count bucket
PEER_RETENTION = 600  # seconds: the lease's ttl is expires_at + 2 x this
LIVE_TTL = 3600  # seconds a live count outlives its bucket


def _ts(ms):
    """ms (a Unix time in whole milliseconds) as an RFC 3339 string in UTC."""
    d = _dt.datetime.fromtimestamp(ms // 1000, tz=_dt.timezone.utc).replace(microsecond=(ms % 1000) * 1000)
    return d.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _ms(t):
    """Unix time t in seconds as whole milliseconds."""
    return int(t * 1000)


def _parse_ts(s):
    """An RFC 3339 string (nanoseconds allowed) as a Unix time in seconds."""
    s = s.replace("Z", "+00:00")
    if "." in s:
        head, rest = s.split(".", 1)
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        frac, zone = rest[:i], rest[i:]
        s = head + "." + (frac + "000000")[:6] + zone
    return _dt.datetime.fromisoformat(s).timestamp()


def bucket_of(t):
    """The live-count bucket of Unix time t."""
    return int(t) // LIVE_BUCKET


class Rate:
    """A RATE item: the aggregate rate (messages/s) all consumers may take."""

    def __init__(self, loop, per_second, written_at, expires_at, version=1, legacy_live=0, weights=None):
        self.loop, self.per_second = loop, per_second
        self.written_at, self.expires_at = written_at, expires_at
        self.version, self.legacy_live, self.weights = version, legacy_live, weights or {}

    def expired(self, now):
        return now >= self.expires_at

    def lease_layout(self):
        """The layout this client writes for a controller of self.version."""
        return min(max(self.version, 1), LATEST_LAYOUT)


def read_rate(table, loop):
    """The loop's RATE, or None when it is missing or invalid (then use the
    safe rate, never 0). Attributes of later versions are ignored."""
    item = table.get_item(Key={"pk": loop, "sk": "RATE"}, ConsistentRead=True).get("Item")
    if not item:
        return None
    try:
        per_second = float(item["rate"])
        written, expires = _parse_ts(item["written_at"]), _parse_ts(item["expires_at"])
    except (KeyError, TypeError, ValueError):
        return None
    if per_second != per_second or per_second < 0:  # NaN or negative
        return None
    weights = {k: float(v) for k, v in item.get("weights", {}).items()}
    return Rate(loop, per_second, written, expires, int(item.get("v", 1)), int(item.get("legacy_live", 0)), weights)


class Lease:
    """A consumer instance's lease on its loop and its report of what it
    stored (running counts since it started)."""

    def __init__(self, table, loop, instance=None, clock=time.time):
        self.table, self.loop = table, loop
        self.instance = instance or os.urandom(8).hex()
        self.clock = clock
        self.started = _ms(clock())
        self.stored = self.batches = self.batch_messages = self.working_ns = 0
        self._buckets = []  # the live-count buckets this instance added itself to

    def item(self, reported, expires, layout):
        pk, sk = self.loop + "#" + self.instance, "PEER"
        item = {"loop": self.loop, "instance": self.instance, "stored": self.stored,
                "started_at": _ts(self.started), "reported_at": _ts(reported), "expires_at": _ts(expires),
                "expires_ms": expires, "ttl": expires // 1000 + 2 * PEER_RETENTION}
        if layout >= 2:
            pk, sk = self.loop + "#LEASES", "PEER#" + self.instance
            item["v"] = layout
        if self.batches:
            item.update(batches=self.batches, batch_messages=self.batch_messages, working_ns=self.working_ns)
        item.update(pk=pk, sk=sk)
        return item

    def refresh(self, rate, closing=False):
        """Write the lease in the layout rate's controller reads (layout 1
        when rate is None), and the live count in layout 2."""
        now = _ms(self.clock())
        expires = now if closing else now + int(LEASE_TTL * 1000)
        layout = rate.lease_layout() if rate else 1
        if layout < 2 or rate.legacy_live > 0:
            self.table.put_item(Item=self.item(now, expires, 1))
        if layout < 2:
            return
        self.table.put_item(Item=self.item(now, expires, 2))
        b = bucket_of(now // 1000)
        if closing:
            for counted in self._buckets:
                if counted >= b - 1:
                    self._add_live(counted, -1)
            self._buckets = []
        elif b not in self._buckets:
            self._add_live(b, 1)
            self._buckets = (self._buckets + [b])[-2:]

    def _add_live(self, bucket, delta):
        self.table.update_item(
            Key={"pk": self.loop + "#LEASES", "sk": live_sk(self.loop, bucket)},
            UpdateExpression="ADD n :d SET #ttl = :ttl, #loop = :loop",
            ExpressionAttributeNames={"#ttl": "ttl", "#loop": "loop"},
            ExpressionAttributeValues={":d": delta, ":ttl": (bucket + 1) * LIVE_BUCKET + LIVE_TTL, ":loop": self.loop})

    def live(self, rate):
        """The live instances of the loop (at least 1: this one)."""
        now = self.clock()
        if rate is None or rate.lease_layout() < 2:
            return max(1, self._live_v1(now))
        b = bucket_of(now)
        out = self.table.query(
            KeyConditionExpression="pk = :pk AND sk BETWEEN :from AND :to",
            ExpressionAttributeValues={":pk": self.loop + "#LEASES", ":from": live_sk(self.loop, b - 1), ":to": live_sk(self.loop, b)})
        counts = {it["sk"]: int(it["n"]) for it in out["Items"]}
        n = max(counts.get(live_sk(self.loop, b), 0), counts.get(live_sk(self.loop, b - 1), 0), 0)
        return max(1, n + rate.legacy_live)

    def _live_v1(self, now):
        kw = dict(IndexName="by-sk", Select="COUNT",
                  KeyConditionExpression="sk = :sk AND begins_with(pk, :prefix)",
                  FilterExpression="#loop = :loop AND expires_ms > :now",
                  ExpressionAttributeNames={"#loop": "loop"},
                  ExpressionAttributeValues={":sk": "PEER", ":prefix": self.loop + "#", ":loop": self.loop, ":now": int(now * 1000)})
        n = 0
        while True:
            out = self.table.query(**kw)
            n += out["Count"]
            if "LastEvaluatedKey" not in out:
                return n
            kw["ExclusiveStartKey"] = out["LastEvaluatedKey"]


def live_sk(loop, bucket):
    return "LIVE#%s#%012d" % (loop, bucket)


class Pacer:
    """Paces one consumer instance at its share of the loop's RATE: reads
    RATE at most once a second, refreshes the lease every LEASE_EVERY
    seconds, and spaces the messages (a token bucket of one second's share).
    It is safe for concurrent use."""

    def __init__(self, table, loop, safe_rate=10.0, instance=None, clock=time.time, sleep=time.sleep):
        self.lease = Lease(table, loop, instance, clock)
        self.table, self.loop, self.safe_rate = table, loop, safe_rate
        self.clock, self.sleep = clock, sleep
        self._mu = threading.Lock()
        self._rate, self._rate_at, self._lease_at = None, None, None
        self._live, self._tat = 1, clock()

    def share(self):
        """This instance's share of the rate, messages/s."""
        with self._mu:
            now = self.clock()
            if self._rate_at is None or now - self._rate_at >= 1.0:
                self._rate, self._rate_at = read_rate(self.table, self.loop), now
            if self._lease_at is None or now - self._lease_at >= LEASE_EVERY:
                self._lease_at = now
                self.lease.refresh(self._rate)
                self._live = self.lease.live(self._rate)
            r = self._rate
            total = self.safe_rate if r is None or r.expired(now) else r.per_second
            return total / self._live

    def wait(self, n):
        """Block until n messages may go at this instance's share; while the
        rate is 0 (paused), wait and read it again."""
        while True:
            share = self.share()
            if share > 0:
                break
            self.sleep(1.0)
        with self._mu:  # virtual scheduling, with one second of burst
            now = self.clock()
            self._tat = max(self._tat, now) + n / share
            delay = self._tat - now - 1.0
        if delay > 0:
            self.sleep(delay)

    def stored(self, n, working_seconds=0.0):
        """Count one batch of n messages stored: the next refresh reports it."""
        with self._mu:
            self.lease.stored += n
            self.lease.batches += 1
            self.lease.batch_messages += n
            self.lease.working_ns += int(working_seconds * 1e9)

    def close(self):
        """The final counts, in a lapsed lease: the others stop counting this one."""
        with self._mu:
            self.lease.refresh(self._rate, closing=True)

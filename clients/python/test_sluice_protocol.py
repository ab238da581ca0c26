"""The Python client against a local DynamoDB (moto: AWS_ENDPOINT_URL).

Run by `go test ./internal/protocheck` (make test), which gives it a fresh
table in SLUICE_TABLE and then checks every item it wrote against
docs/protocol.md. Alone: `python3 -m unittest -v test_sluice_protocol`
creates and deletes its own table.
"""

import os
import time
import unittest
from decimal import Decimal

import boto3

import sluice_protocol as sp


def _table():
    ddb = boto3.resource("dynamodb", region_name=os.environ.get("AWS_REGION", "us-east-1"))
    name = os.environ.get("SLUICE_TABLE")
    if name:
        return ddb.Table(name), False
    name = "sluice-py-%d" % time.time_ns()
    ddb.create_table(
        TableName=name, BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        GlobalSecondaryIndexes=[{"IndexName": "by-sk", "Projection": {"ProjectionType": "ALL"},
                                 "KeySchema": [{"AttributeName": "sk", "KeyType": "HASH"}, {"AttributeName": "pk", "KeyType": "RANGE"}]}])
    return ddb.Table(name), True


def write_rate(table, loop, rate, v=2, legacy=0, ttl=180.0):
    """A RATE item as the controller writes it."""
    now = int(time.time() * 1000)
    item = {"pk": loop, "sk": "RATE", "rate": Decimal(str(rate)), "written_at": sp._ts(now),
            "expires_at": sp._ts(now + int(ttl * 1000)), "tick": 1, "v": v}
    if legacy:
        item["legacy_live"] = legacy
    table.put_item(Item=item)


class ProtocolTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.table, cls.own = _table()

    @classmethod
    def tearDownClass(cls):
        if cls.own:
            cls.table.delete()

    def test_rate_read_and_versions(self):
        write_rate(self.table, "py-rate", 40)
        r = sp.read_rate(self.table, "py-rate")
        self.assertEqual((r.per_second, r.version, r.lease_layout()), (40.0, 2, 2))
        self.assertFalse(r.expired(time.time()))
        self.assertIsNone(sp.read_rate(self.table, "py-missing"))
        # A later version: its rate is read, its layout is the newest known.
        self.assertEqual(sp.Rate("l", 1, 0, 1, version=7).lease_layout(), sp.LATEST_LAYOUT)
        # No v (a controller of version 1): layout 1.
        self.assertEqual(sp.Rate("l", 1, 0, 1).lease_layout(), 1)

    def test_invalid_rate_is_none_not_zero(self):
        self.table.put_item(Item={"pk": "py-bad", "sk": "RATE", "written_at": sp._ts(0), "expires_at": sp._ts(10**13)})
        self.assertIsNone(sp.read_rate(self.table, "py-bad"))
        self.table.delete_item(Key={"pk": "py-bad", "sk": "RATE"})

    def test_leases_share_the_rate(self):
        write_rate(self.table, "py-orders", 300)
        a, b = sp.Pacer(self.table, "py-orders"), sp.Pacer(self.table, "py-orders")
        a.share()
        self.assertEqual(b.share(), 150.0)  # 300 / 2 live instances
        a.stored(10, 0.25)
        a.lease.refresh(a._rate)
        item = self.table.get_item(Key={"pk": "py-orders#LEASES", "sk": "PEER#" + a.lease.instance}, ConsistentRead=True)["Item"]
        self.assertEqual((item["stored"], item["batches"], item["batch_messages"], item["working_ns"]), (10, 1, 10, 250000000))
        a.close()
        self.assertEqual(b.lease.live(b._rate), 1)  # a left the count at once
        b.close()

    def test_legacy_consumers_are_counted(self):
        write_rate(self.table, "py-legacy", 100, legacy=2)
        p = sp.Pacer(self.table, "py-legacy")
        self.assertAlmostEqual(p.share(), 100 / 3)  # itself and the two legacy instances
        # ...which count it through its layout 1 lease.
        old = sp.Lease(self.table, "py-legacy")
        old.refresh(None)  # a consumer of version 1
        self.assertEqual(old.live(None), 2)
        p.close()

    def test_wait_paces_at_the_share(self):
        write_rate(self.table, "py-pace", 20)
        clock = [1000.0]
        slept = []

        def sleep(d):
            slept.append(d)
            clock[0] += d

        p = sp.Pacer(self.table, "py-pace", clock=lambda: clock[0], sleep=sleep)
        p.lease.clock = time.time  # the lease's times are real: the count reads now's bucket
        p.lease.started = sp._ms(time.time())
        for _ in range(5):
            p.wait(10)  # 50 messages at 20/s: 2.5 s, less the 1 s of burst
        self.assertAlmostEqual(sum(slept), 1.5, places=6)
        p.close()


if __name__ == "__main__":
    unittest.main()

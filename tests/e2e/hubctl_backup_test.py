#!/usr/bin/python3
"""`hubctl backup` against the real hubd: a backup taken while the hub serves
writes is a sound SQLite file, and a hubd started on it has everything that
was acknowledged before the backup began."""
import json
import os
import shutil
import subprocess
import sys
import threading
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hubtest  # noqa: E402

PROJECT = "prj_AAAAAAAAAAAAAAAAAAAAAA"
CTO_WIRE = ("rk2.eyJwcm9qZWN0X2lkIjoicHJqX0FBQUFBQUFBQUFBQUFBQUFBQUFBQUEiLCJy"
            "b2xlX2tpbmQiOiJjdG8ifQ")
USAGE = 64


def hubctl_path():
    return os.path.abspath(os.environ["HUBCTL"])


def _field(number, payload):
    data = payload.encode()
    return bytes([number << 3 | 2, len(data)]) + data


class BackupTest(unittest.TestCase):
    def setUp(self):
        self.dir = os.path.join(hubtest.tmpdir(), self.id().rsplit(".", 1)[-1])
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.hubd = hubtest.Hubd(os.path.join(self.dir, "live.sqlite"))
        self.addCleanup(self.hubd.stop)
        self.channel = grpc.insecure_channel(self.hubd.address)
        self.addCleanup(self.channel.close)

    def ctl(self, address, *args):
        r = subprocess.run([hubctl_path(), "--addr=" + address, *args],
                           capture_output=True, text=True, timeout=120)
        return r.returncode, r.stdout, r.stderr

    def register(self, agent_id):
        call = self.channel.unary_unary("/hub.v1.PresenceService/RegisterAgent")
        call(_field(1, agent_id) + bytes([2 << 3, 3]), timeout=10)

    def test_a_backup_taken_under_writes_restores_every_acknowledged_write(self):
        acknowledged = []
        for i in range(50):
            self.register("session:before-%d" % i)
            acknowledged.append("session:before-%d" % i)
        code, _, err = self.ctl(self.hubd.address, "roles", "reserve", CTO_WIRE)
        self.assertEqual(code, 0, err)
        code, out, err = self.ctl(self.hubd.address, "--json", "publish",
                                  "session:before-0", "--from=session:before-1",
                                  '--payload={"task":"keep me"}')
        self.assertEqual(code, 0, err)
        message_id = json.loads(out)["messageId"]

        # Writers keep going while the backup runs.
        stop = threading.Event()
        during = []

        def write():
            n = 0
            while not stop.is_set():
                self.register("session:during-%d" % n)
                during.append(n)
                n += 1

        writer = threading.Thread(target=write)
        writer.start()
        out_path = os.path.join(self.dir, "backup.sqlite")
        try:
            code, out, err = self.ctl(self.hubd.address, "--json", "backup",
                                      "--out=" + out_path)
        finally:
            stop.set()
            writer.join()
        self.assertEqual(code, 0, err)
        result = json.loads(out)
        self.assertEqual(result["out"], out_path)
        self.assertEqual(int(result["bytes"]), os.path.getsize(out_path))
        self.assertFalse(os.path.exists(out_path + ".partial"))
        self.assertGreater(len(during), 0, "no write ran during the backup")
        # The hub left no copy of its own behind.
        self.assertEqual(sorted(f for f in os.listdir(self.dir) if ".backup-" in f), [])

        check = subprocess.run(["sqlite3", out_path, "PRAGMA integrity_check"],
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(check.stdout.strip(), "ok", check.stderr)

        # Restore: a new hubd on a copy of the backup has what was acknowledged.
        self.hubd.stop()
        restored_path = os.path.join(self.dir, "restored.sqlite")
        shutil.copyfile(out_path, restored_path)
        restored = hubtest.Hubd(restored_path)
        self.addCleanup(restored.stop)
        code, out, err = self.ctl(restored.address, "--json", "agents", "list",
                                  "--page-size=1000")
        self.assertEqual(code, 0, err)
        agents = {a["agentId"] for a in json.loads(out).get("agents", [])}
        for agent in acknowledged:
            self.assertIn(agent, agents)
        code, out, err = self.ctl(restored.address, "--json", "roles", "get", CTO_WIRE)
        self.assertEqual(code, 0, err)
        code, out, err = self.ctl(restored.address, "--json", "pending",
                                  "session:before-0")
        self.assertEqual(code, 0, err)
        self.assertIn(message_id, out)

    def test_backup_needs_a_writable_out_file(self):
        code, _, err = self.ctl(self.hubd.address, "backup")
        self.assertEqual(code, USAGE, err)
        self.assertIn("--out", err)
        bad = os.path.join(self.dir, "missing-dir", "b.sqlite")
        code, _, err = self.ctl(self.hubd.address, "backup", "--out=" + bad)
        self.assertEqual(code, USAGE, err)
        self.assertFalse(os.path.exists(bad))

    def test_a_backup_of_an_unreachable_hub_fails_and_leaves_no_file(self):
        out_path = os.path.join(self.dir, "never.sqlite")
        code, _, err = self.ctl("127.0.0.1:1", "backup", "--out=" + out_path)
        self.assertEqual(code, 14, err)  # UNAVAILABLE
        self.assertFalse(os.path.exists(out_path))
        self.assertFalse(os.path.exists(out_path + ".partial"))


if __name__ == "__main__":
    hubtest.run_tests()

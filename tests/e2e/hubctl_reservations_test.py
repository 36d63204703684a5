#!/usr/bin/python3
"""hubctl reservations against the real hubd and a real git repository:
reserve, list, check, release; `check --staged` refusing staged files that
another agent holds exclusively; and `install-hook`'s pre-commit hook, which
keeps (chains) an existing hook, installs idempotently, refuses the commit
naming the holder and the reservation, and lets it through once released;
and `watch`, which prints the live reservations and then each change, as
lines or as JSON."""
import json
import os
import shutil
import subprocess
import sys
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hubtest  # noqa: E402

PROJECT = "prj_AAAAAAAAAAAAAAAAAAAAAA"
OK, INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, USAGE = 0, 3, 5, 9, 64
COMMANDS = ["reservations list", "reservations reserve", "reservations renew",
            "reservations release", "reservations force-release",
            "reservations check", "reservations watch", "reservations install-hook"]


hubctl_path = hubtest.hubctl_path


def _field(number, payload):
    data = payload.encode()
    return bytes([number << 3 | 2, len(data)]) + data


class HubctlReservationsTest(hubtest.HubctlCalls, unittest.TestCase):
    PROJECT = PROJECT

    @classmethod
    def setUpClass(cls):
        cls.hubd = hubtest.Hubd(os.path.join(hubtest.tmpdir(), "reservations.sqlite"))
        channel = grpc.insecure_channel(cls.hubd.address)
        register = channel.unary_unary("/hub.v1.PresenceService/RegisterAgent")
        for agent in ("agent-a", "agent-b"):
            register(_field(1, agent) + bytes([2 << 3, 3]) + _field(8, PROJECT),
                     timeout=10)
        channel.close()

    @classmethod
    def tearDownClass(cls):
        cls.hubd.stop()

    def setUp(self):
        self.repo = os.path.join(hubtest.tmpdir(), self._testMethodName)
        shutil.rmtree(self.repo, ignore_errors=True)
        os.makedirs(os.path.join(self.repo, "src"))
        os.makedirs(os.path.join(self.repo, "docs"))
        self.git("init", "-q")
        self.git("config", "user.email", "test@example.com")
        self.git("config", "user.name", "test")

    def tearDown(self):
        # Whatever a test reserved is released, so tests stay independent.
        listed = json.loads(self.ok("--json", "reservations", "list",
                                    "--project=" + PROJECT))
        for r in listed.get("reservations", []):
            self.ok("reservations", "force-release", r["reservationId"])

    def git(self, *args, agent=None):
        return subprocess.run(["git", *args], cwd=self.repo, capture_output=True,
                              text=True, timeout=60, env=self.env(agent))

    def reserve(self, agent, *patterns):
        out = self.ok("--json", "reservations", "reserve", *patterns, agent=agent)
        return json.loads(out)["reservation"]

    def write(self, path, text="x\n"):
        with open(os.path.join(self.repo, path), "w") as f:
            f.write(text)

    def test_every_subcommand_has_its_own_help(self):
        self.assert_each_has_its_own_help(COMMANDS)

    def test_reserve_list_check_and_release(self):
        r = self.reserve("agent-a", "src/", "docs/*.md")
        self.assertEqual(r["patterns"], ["src", "docs/*.md"])
        self.assertGreater(int(r["token"]), 0)
        self.assertIn(r["reservationId"], self.ok("reservations", "list"))
        listed = json.loads(self.ok("--json", "reservations", "list",
                                    "--path=docs/a.md"))
        self.assertEqual([x["reservationId"] for x in listed["reservations"]],
                         [r["reservationId"]])

        code, _, err = self.ctl("--json", "reservations", "reserve", "src/a.c",
                                "--shared", agent="agent-b")
        self.assertEqual(code, FAILED_PRECONDITION, err)
        error = json.loads(err)
        self.assertEqual(error["reason"], "RESERVATION_CONFLICT")
        self.assertEqual(error["metadata"]["holder_agent_id"], "agent-a")
        self.assertEqual(error["metadata"]["reservation_id"], r["reservationId"])

        code, _, err = self.ctl("reservations", "check", "src/a.c", agent="agent-b")
        self.assertEqual(code, FAILED_PRECONDITION, err)
        self.assertIn("agent-a", err)
        self.assertIn(r["reservationId"], err)
        self.ok("reservations", "check", "src/a.c", agent="agent-a")  # its own
        self.ok("reservations", "check", "README", agent="agent-b")

        code, _, err = self.ctl("--json", "reservations", "reserve", "/etc",
                                agent="agent-b")
        self.assertEqual(code, INVALID_ARGUMENT, err)
        self.assertEqual(json.loads(err)["reason"], "RESERVATION_PATH_ABSOLUTE")
        code, _, err = self.ctl("--json", "reservations", "release",
                                r["reservationId"], agent="agent-b")
        self.assertEqual(code, FAILED_PRECONDITION, err)
        self.assertEqual(json.loads(err)["reason"], "RESERVATION_NOT_HOLDER")

        self.ok("reservations", "release", r["reservationId"], agent="agent-a")
        self.ok("reservations", "check", "src/a.c", agent="agent-b")
        code, _, err = self.ctl("--json", "reservations", "release",
                                r["reservationId"], agent="agent-a")
        self.assertEqual(code, NOT_FOUND, err)

    def watch(self, *flags, json_output=False):
        """Starts `hubctl reservations watch` and reads up to its snapshot's end."""
        proc = subprocess.Popen([hubctl_path(), *(["--json"] if json_output else []),
                                 "reservations", "watch", "--timeout=60s", *flags],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=self.env(None))
        self.addCleanup(lambda: (proc.kill(), proc.wait()))
        lines = []
        while True:
            line = proc.stdout.readline()
            if not line:
                self.fail("watch ended: " + proc.stderr.read())
            lines.append(line.rstrip("\n"))
            if line.startswith("-- snapshot") or '"snapshotEnd"' in line:
                return proc, lines

    def rest(self, proc, n):
        """The next `n` lines of a watch run with --count=n, which then exits 0."""
        lines = [proc.stdout.readline().rstrip("\n") for _ in range(n)]
        self.assertEqual(proc.wait(timeout=60), OK, proc.stderr.read())
        self.assertEqual(proc.stdout.read(), "")
        return lines

    def test_watch_prints_the_snapshot_then_each_change_as_it_commits(self):
        before = self.reserve("agent-a", "src")
        proc, lines = self.watch("--count=3")
        self.assertEqual(len(lines), 2, lines)
        self.assertTrue(lines[0].startswith("snapshot " + before["reservationId"]),
                        lines)
        self.assertIn("agent=agent-a", lines[0])
        self.assertIn("token=" + before["token"], lines[0])
        self.assertEqual(lines[1], "-- snapshot: 1 reservations, 0 waiters; live changes follow")

        r = self.reserve("agent-b", "docs", "lib")
        self.ok("reservations", "release", r["reservationId"], "lib", agent="agent-b")
        self.ok("reservations", "release", before["reservationId"], agent="agent-a")
        changes = self.rest(proc, 3)
        out = "\n".join(changes)
        self.assertTrue(changes[0].startswith("granted " + r["reservationId"]), out)
        self.assertIn("patterns=docs,lib", changes[0])
        self.assertIn("token=" + r["token"], changes[0])
        self.assertTrue(changes[1].startswith("narrowed " + r["reservationId"]), out)
        self.assertIn("patterns=docs ", changes[1])
        self.assertTrue(changes[2].startswith("released " + before["reservationId"]),
                        out)

    def test_watch_json_prints_each_stream_item(self):
        proc, lines = self.watch("--count=1", json_output=True)
        self.assertEqual([json.loads(x) for x in lines][-1]["snapshotEnd"].get(
            "reservationCount", "0"), "0")
        r = self.reserve("agent-b", "tools")
        change = json.loads(self.rest(proc, 1)[0])["change"]
        self.assertEqual(change["kind"], "RESERVATION_CHANGE_KIND_GRANTED")
        self.assertEqual(change["reservation"]["reservationId"], r["reservationId"])
        self.assertEqual(change["reservation"]["token"], r["token"])
        self.assertGreater(int(change["seq"]), 0)

    def test_watch_resumes_after_the_last_seq_it_printed_across_a_hub_restart(self):
        self.reserve("agent-a", "src")
        proc, _ = self.watch(json_output=True)
        r = self.reserve("agent-b", "docs")
        change = json.loads(proc.stdout.readline())["change"]
        self.assertEqual(change["reservation"]["reservationId"], r["reservationId"])
        seen = change["seq"]
        # The hub restarts on the same address and database: the watch's
        # stream breaks (UNAVAILABLE), hubctl opens it again after `seen`.
        old = type(self).hubd
        old.stop()
        type(self).hubd = hubtest.Hubd(old.db_path, listen=old.address)
        resumed = json.loads(proc.stdout.readline())
        self.assertEqual(resumed["resume"], {"afterSeq": seen, "resumed": True,
                                             "oldestSeq": seen}, resumed)
        later = self.reserve("agent-a", "lib")
        change = json.loads(proc.stdout.readline())["change"]
        self.assertEqual(change["reservation"]["reservationId"], later["reservationId"])
        self.assertEqual(int(change["seq"]), int(seen) + 1)  # nothing twice, no gap
        proc.kill()
        self.assertIn("resuming after seq " + seen, proc.stderr.read())

    def test_watch_after_a_seq_from_the_future_is_invalid_argument(self):
        code, _, err = self.ctl("--json", "reservations", "watch", "--after-seq=999999999",
                                "--timeout=30s")
        self.assertEqual(code, INVALID_ARGUMENT, err)
        self.assertEqual(json.loads(err)["reason"], "RESERVATION_CURSOR_INVALID")

    def test_reserve_wait_gets_the_path_once_its_holder_releases_it(self):
        held = self.reserve("agent-a", "src")
        proc, _ = self.watch()
        waiting = subprocess.Popen([hubctl_path(), "--json", "reservations", "reserve",
                                    "src/a.c", "--wait=60s"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=self.env("agent-b"))
        self.addCleanup(lambda: (waiting.kill(), waiting.wait()))
        line = proc.stdout.readline()  # the waiter joined the queue
        self.assertTrue(line.startswith("waiting "), line)
        self.assertIn("agent=agent-b", line)
        # It names what it waits behind: the reservation, its holder, patterns.
        self.assertIn(" waits_for=%s (agent-a: src)" % held["reservationId"], line)
        self.ok("reservations", "release", held["reservationId"], agent="agent-a")
        out, err = waiting.communicate(timeout=60)
        self.assertEqual(waiting.returncode, OK, err)
        self.assertEqual(json.loads(out)["reservation"]["agentId"], "agent-b")

        code, _, err = self.ctl("--json", "reservations", "reserve", "src",
                                "--wait=200ms", agent="agent-a")
        self.assertEqual(code, FAILED_PRECONDITION, err)
        self.assertEqual(json.loads(err)["reason"], "RESERVATION_CONFLICT")
        code, _, err = self.ctl("--json", "reservations", "reserve", "src",
                                "--wait=11m", agent="agent-a")
        self.assertEqual(code, INVALID_ARGUMENT, err)
        self.assertEqual(json.loads(err)["reason"], "RESERVATION_WAIT_INVALID")

    def test_watch_without_a_project_is_invalid_argument(self):
        env = self.env(None)
        env.pop("HUB_PROJECT_ID")
        r = subprocess.run([hubctl_path(), "--json", "reservations", "watch",
                            "--timeout=30s"], capture_output=True, text=True,
                           timeout=60, env=env)
        self.assertEqual(r.returncode, INVALID_ARGUMENT, r.stderr)
        self.assertEqual(json.loads(r.stderr)["reason"], "PROJECT_ID_INVALID")

    def test_check_staged_refuses_files_another_agent_holds_exclusively(self):
        r = self.reserve("agent-a", "src")
        self.reserve("agent-b", "docs")
        self.write("src/a.c")
        self.write("docs/x.md")
        self.write("odd name*?.txt")
        self.assertEqual(self.git("add", "-A").returncode, 0)
        code, _, err = self.ctl("reservations", "check", "--staged",
                                agent="agent-b", cwd=self.repo)
        self.assertEqual(code, FAILED_PRECONDITION, err)
        self.assertIn("src/a.c", err)
        self.assertIn("agent-a", err)
        self.assertIn(r["reservationId"], err)
        self.assertNotIn("docs/x.md", err)  # agent-b's own
        # --repo from elsewhere; the holder itself may commit.
        code, _, err = self.ctl("reservations", "check", "--staged",
                                "--repo=" + self.repo, agent="agent-a")
        self.assertEqual(code, FAILED_PRECONDITION, err)  # agent-b's docs
        self.assertIn("docs/x.md", err)
        # A shared reservation does not stop a commit of another agent.
        self.ok("reservations", "release", r["reservationId"], agent="agent-a")
        self.ok("reservations", "reserve", "src", "--shared", agent="agent-a")
        self.ok("reservations", "check", "--staged", agent="agent-b", cwd=self.repo)
        code, _, err = self.ctl("reservations", "check", "--staged",
                                cwd=hubtest.tmpdir(), agent="agent-b")
        self.assertEqual(code, USAGE, err)  # not a git repository

    def test_the_installed_hook_chains_an_existing_one_and_refuses_the_commit(self):
        hooks = os.path.join(self.repo, ".git", "hooks")
        os.makedirs(hooks, exist_ok=True)
        ran = os.path.join(self.repo, "chained-ran")
        with open(os.path.join(hooks, "pre-commit"), "w") as f:
            f.write("#!/bin/sh\necho ran >> '%s'\n" % ran)
        os.chmod(os.path.join(hooks, "pre-commit"), 0o755)

        out = self.ok("--addr=" + self.hubd.address, "reservations", "install-hook",
                      "--repo=" + self.repo)
        self.assertIn("pre-commit.hub-chained", out)
        with open(os.path.join(hooks, "pre-commit")) as f:
            first = f.read()
        # Again: the same hook, the original still chained, not chained twice.
        out = self.ok("--addr=" + self.hubd.address, "reservations", "install-hook",
                      cwd=self.repo)
        self.assertIn("(unchanged)", out)
        with open(os.path.join(hooks, "pre-commit")) as f:
            self.assertEqual(f.read(), first)
        with open(os.path.join(hooks, "pre-commit.hub-chained")) as f:
            self.assertIn("chained-ran", f.read())

        r = self.reserve("agent-a", "src/**/*.c")
        self.write("src/main.c")
        self.git("add", "src/main.c")
        refused = self.git("commit", "-q", "-m", "edit", agent="agent-b")
        self.assertNotEqual(refused.returncode, 0, refused.stdout)
        self.assertIn("agent-a", refused.stderr)
        self.assertIn(r["reservationId"], refused.stderr)
        self.assertIn("src/main.c", refused.stderr)
        with open(ran) as f:
            self.assertEqual(f.read(), "ran\n")  # the chained hook ran first
        self.assertNotEqual(self.git("rev-parse", "HEAD").returncode, 0)

        # The holder commits; after its release so does anyone.
        done = self.git("commit", "-q", "-m", "by the holder", agent="agent-a")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.ok("reservations", "release", r["reservationId"], agent="agent-a")
        self.write("src/main.c", "y\n")
        self.git("add", "src/main.c")
        done = self.git("commit", "-q", "-m", "after release", agent="agent-b")
        self.assertEqual(done.returncode, 0, done.stderr)

        # A failing chained hook still stops the commit.
        with open(os.path.join(hooks, "pre-commit.hub-chained"), "w") as f:
            f.write("#!/bin/sh\nexit 3\n")
        self.write("docs/x.md")
        self.git("add", "docs/x.md")
        self.assertNotEqual(self.git("commit", "-q", "-m", "x").returncode, 0)


if __name__ == "__main__":
    hubtest.run_tests()

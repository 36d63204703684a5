#!/usr/bin/python3
"""hubctl, the operator CLI, against the real hubd: every subcommand once
successfully and once failing, with the exit status that follows the gRPC
status code (64 for a refused command line)."""
import json
import os
import subprocess
import sys
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hubtest  # noqa: E402

PROJECT = "prj_AAAAAAAAAAAAAAAAAAAAAA"
CTO_WIRE = ("rk2.eyJwcm9qZWN0X2lkIjoicHJqX0FBQUFBQUFBQUFBQUFBQUFBQUFBQUEiLCJy"
            "b2xlX2tpbmQiOiJjdG8ifQ")
SCOPE = "scp_CCCCCCCCCCCCCCCCCCCCCC"
COMMANDS = ["status", "agents list", "agents get", "roles list", "roles get",
            "roles watch", "roles ensure", "roles reserve", "roles close",
            "roles closed", "candidates list",
            "candidates add", "publish", "pending", "ack", "dead-letters",
            "dead-letters redrive",
            "rolekey encode", "rolekey decode"]
OK, INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED, FAILED_PRECONDITION = (
    0, 3, 5, 8, 9)
UNAVAILABLE, USAGE = 14, 64


def hubctl_path():
    return os.path.abspath(os.environ["HUBCTL"])


def _field(number, payload):
    """A length-delimited protobuf field (enough for RegisterAgentRequest)."""
    data = payload.encode()
    return bytes([number << 3 | 2, len(data)]) + data


def dead_letter(case, agent_id):
    """Registers `agent_id`, publishes a 1 s message to it through hubctl and
    waits (however long the sweep takes) until it is a dead letter."""
    case.register(agent_id)
    published = json.loads(case.ok("--json", "publish", agent_id,
                                   "--from=ctl-sender", "--ttl=1s"))
    message_id = published["messageId"]
    deadline = time.monotonic() + 30
    while (message_id not in case.ok("dead-letters")
           and time.monotonic() < deadline):
        time.sleep(0.05)
    case.assertIn(message_id, case.ok("dead-letters"))
    return message_id


class HubctlTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.hubd = hubtest.Hubd(os.path.join(hubtest.tmpdir(), "hubctl.sqlite"))
        cls.channel = grpc.insecure_channel(cls.hubd.address)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.hubd.stop()

    def ctl(self, *args, addr_env=None):
        env = dict(os.environ)
        env["HUB_ADDR"] = self.hubd.address if addr_env is None else addr_env
        r = subprocess.run([hubctl_path(), *args], capture_output=True,
                           text=True, timeout=60, env=env)
        return r.returncode, r.stdout, r.stderr

    def ok(self, *args):
        code, out, err = self.ctl(*args)
        self.assertEqual(code, OK, "hubctl %s: %s" % (" ".join(args), err))
        return out

    def fails(self, expected_code, reason, *args):
        """Runs with --json and checks the exit status and the hub's reason."""
        code, out, err = self.ctl("--json", *args)
        self.assertEqual(code, expected_code, "hubctl %s: %s" % (" ".join(args), err))
        if reason:
            self.assertEqual(json.loads(err)["reason"], reason, err)
            self.assertEqual(json.loads(err)["exitCode"], expected_code)
        return err

    def register(self, agent_id, project=None, capabilities=()):
        request = _field(1, agent_id) + bytes([2 << 3, 3])  # cli = CLAUDE
        for c in capabilities:
            request += _field(4, c)
        if project:
            request += _field(8, project)
        call = self.channel.unary_unary("/hub.v1.PresenceService/RegisterAgent")
        call(request, timeout=10)

    # ---- help and the command line ----

    def test_help_lists_every_command_and_each_has_its_own_help(self):
        out = self.ok("--help")
        for command in COMMANDS:
            self.assertIn(command, out)
            sub = self.ok(*command.split(), "--help")
            self.assertIn("Usage: hubctl " + command, sub)
            self.assertIn("Exit status", sub)
        self.assertIn("hubctl roles SUBCOMMAND", self.ok("roles", "--help"))

    def test_a_refused_command_line_exits_64_without_calling_the_hub(self):
        for args in (["frobnicate"], ["roles", "frob"], ["status", "--nope"],
                     ["agents", "get"], ["status", "--timeout=soon"], []):
            code, _, err = self.ctl(*args, addr_env="127.0.0.1:1")
            self.assertEqual(code, USAGE, "%s: %s" % (args, err))

    # ---- status and addressing ----

    def test_status_reports_the_hub_in_text_and_json(self):
        self.assertIn("hub_instance_id:", self.ok("status"))
        status = json.loads(self.ok("status", "--json"))
        self.assertEqual(status["hubInstanceId"], self.hubd.instance_id)
        self.assertEqual(status["storeType"], "sqlite")

    def test_an_unreachable_hub_exits_with_unavailable(self):
        code, _, err = self.ctl("--json", "status", addr_env="127.0.0.1:1")
        self.assertEqual(code, UNAVAILABLE, err)
        self.assertEqual(json.loads(err)["code"], "UNAVAILABLE")

    def test_addr_flag_overrides_the_environment(self):
        code, out, err = self.ctl("status", "--addr", self.hubd.address,
                                  addr_env="127.0.0.1:1")
        self.assertEqual(code, OK, err)
        self.assertIn(self.hubd.instance_id, out)

    # ---- agents ----

    def test_agents_list_and_get(self):
        self.register("ctl-agent-1", project=PROJECT)
        self.assertIn("ctl-agent-1", self.ok("agents", "list"))
        listed = json.loads(self.ok("agents", "list", "--json", "--status=online"))
        self.assertIn("ctl-agent-1", [a["agentId"] for a in listed["agents"]])
        got = json.loads(self.ok("--json", "agents", "get", "ctl-agent-1"))
        self.assertEqual(got["agent"]["projectId"], PROJECT)
        self.assertIn("status:", self.ok("agents", "get", "ctl-agent-1"))
        self.fails(NOT_FOUND, "AGENT_NOT_FOUND", "agents", "get", "ctl-nobody")
        self.fails(INVALID_ARGUMENT, "PROJECT_ID_INVALID", "agents", "list",
                   "--project=nope")
        self.fails(USAGE, None, "agents", "list", "--status=sleepy")

    # ---- role keys ----

    def test_rolekey_encode_and_decode(self):
        out = self.ok("rolekey", "encode", "--project", PROJECT, "--kind=cto")
        self.assertIn(CTO_WIRE, out)
        decoded = json.loads(self.ok("--json", "rolekey", "decode", CTO_WIRE))
        self.assertEqual(decoded["roleKey"]["projectId"], PROJECT)
        self.fails(INVALID_ARGUMENT, "ROLE_KEY_WIRE_PREFIX", "rolekey", "decode",
                   "rk1.abc")
        self.fails(INVALID_ARGUMENT, "SCOPE_REQUIRED", "rolekey", "encode",
                   "--project", PROJECT, "--kind=lead")

    # ---- roles ----

    def lead_args(self, scope=SCOPE):
        return ["--project", PROJECT, "--kind=lead", "--scope", scope]

    def test_roles_reserve_get_and_list(self):
        scope = "scp_DDDDDDDDDDDDDDDDDDDDDD"
        reserved = json.loads(self.ok("--json", "roles", "reserve",
                                      *self.lead_args(scope)))
        self.assertTrue(reserved["created"])
        wire = reserved["role"]["roleKeyWire"]
        self.fails(FAILED_PRECONDITION, "STALE_EPOCH", "roles", "reserve", wire,
                   "--expected-epoch=7")
        again = json.loads(self.ok("--json", "roles", "reserve", wire,
                                   "--expected-epoch=0"))
        self.assertEqual(again["role"]["epoch"], "1")
        got = json.loads(self.ok("--json", "roles", "get", wire))
        self.assertEqual(got["role"]["roleKey"]["scopeId"], scope)
        self.assertIn("epoch:", self.ok("roles", "get", *self.lead_args(scope)))
        self.fails(NOT_FOUND, "ROLE_NOT_FOUND", "roles", "get",
                   *self.lead_args("scp_EEEEEEEEEEEEEEEEEEEEEE"))
        self.assertIn(scope, self.ok("roles", "list", "--kind=lead"))
        self.fails(INVALID_ARGUMENT, "PROJECT_ID_INVALID", "roles", "list",
                   "--project=prj_short")
        self.fails(USAGE, None, "roles", "list", "--state=sleepy")

    def test_roles_watch_prints_the_snapshot_then_changes(self):
        scope = "scp_FFFFFFFFFFFFFFFFFFFFFF"
        wire = json.loads(self.ok("--json", "roles", "reserve",
                                  *self.lead_args(scope)))["role"]["roleKeyWire"]
        env = dict(os.environ, HUB_ADDR=self.hubd.address)
        watch = subprocess.Popen([hubctl_path(), "--json", "roles", "watch", wire,
                                  "--count=2", "--timeout=30s"],
                                 stdout=subprocess.PIPE, text=True, env=env)
        try:
            first = json.loads(watch.stdout.readline())
            self.assertEqual(first["change"]["kind"], "ROLE_CHANGE_KIND_SNAPSHOT")
            self.assertIn("snapshotEnd", json.loads(watch.stdout.readline()))
            self.ok("roles", "reserve", wire)
            second = json.loads(watch.stdout.readline())
            self.assertEqual(second["change"]["kind"], "ROLE_CHANGE_KIND_UPDATED")
            self.assertEqual(second["change"]["role"]["epoch"], "1")
            self.assertEqual(watch.wait(timeout=30), OK)
        finally:
            if watch.poll() is None:
                watch.kill()
                watch.wait()
            watch.stdout.close()
        self.fails(INVALID_ARGUMENT, "PROJECT_ID_INVALID", "roles", "watch",
                   "--project=prj_bad")

    def test_roles_ensure(self):
        out = json.loads(self.ok("--json", "roles", "ensure", "--project",
                                 "prj_BBBBBBBBBBBBBBBBBBBBBB", "--kind=cto"))
        self.assertEqual(out["receipt"]["disposition"],
                         "ENSURE_ROLE_DISPOSITION_NO_CANDIDATE")
        self.fails(INVALID_ARGUMENT, "ROLE_KEY_WIRE_PREFIX", "roles", "ensure",
                   "rk9.nope")
        self.fails(USAGE, None, "roles", "ensure", CTO_WIRE, "--trigger=whim")

    def test_roles_close_closes_a_lead_scope_for_good(self):
        scope = "scp_GGGGGGGGGGGGGGGGGGGGGG"
        wire = json.loads(self.ok("--json", "roles", "reserve",
                                  *self.lead_args(scope)))["role"]["roleKeyWire"]
        out = self.ok("roles", "close", wire, "--reason=release shipped")
        self.assertIn("result:", out)
        self.assertIn("closed", out)
        self.assertIn("release shipped", out)
        again = json.loads(self.ok("--json", "roles", "close",
                                   *self.lead_args(scope)))
        self.assertTrue(again["alreadyClosed"])
        self.assertEqual(again["closed"]["reason"], "release shipped")
        self.fails(FAILED_PRECONDITION, "ROLE_SCOPE_CLOSED", "roles", "reserve",
                   wire)
        ensured = json.loads(self.ok("--json", "roles", "ensure", wire))
        self.assertEqual(ensured["receipt"]["disposition"],
                         "ENSURE_ROLE_DISPOSITION_SCOPE_CLOSED")
        self.fails(INVALID_ARGUMENT, "ROLE_KIND_UNSUPPORTED", "roles", "close",
                   CTO_WIRE)
        self.fails(USAGE, None, "roles", "close")

    def test_roles_closed_lists_the_closed_scopes_as_recorded(self):
        # A project of its own: the hub is shared by the other tests.
        project = "prj_CCCCCCCCCCCCCCCCCCCCCC"
        scopes = ["scp_HHHHHHHHHHHHHHHHHHHHHH", "scp_IIIIIIIIIIIIIIIIIIIIII",
                  "scp_JJJJJJJJJJJJJJJJJJJJJJ"]
        wires = []
        for i, scope in enumerate(scopes):
            key = ["--project", project, "--kind=lead", "--scope", scope]
            closed = json.loads(self.ok("--json", "roles", "close", *key,
                                        "--reason=done %d" % i))
            wires.append(closed["closed"]["roleKeyWire"])
        listed = json.loads(self.ok("--json", "roles", "closed",
                                    "--project", project))
        got = listed["closedScopes"]
        self.assertEqual([c["roleKeyWire"] for c in got], sorted(wires))
        by_scope = {c["roleKey"]["scopeId"]: c for c in got}
        self.assertEqual(by_scope[scopes[1]]["reason"], "done 1")
        self.assertEqual(by_scope[scopes[1]]["closedBy"], "anonymous")
        self.assertEqual(by_scope[scopes[1]]["roleKey"]["kind"], "ROLE_KIND_LEAD")
        self.assertEqual(by_scope[scopes[1]].get("deadLetteredCount", "0"), "0")
        self.assertIn("closedAt", by_scope[scopes[1]])
        # Pages of two, in text: the second page is reached with the token.
        out = self.ok("roles", "closed", "--project", project, "--page-size=2")
        self.assertIn("CLOSED_BY", out)
        self.assertEqual(sum(scope in out for scope in scopes), 2)
        token = out.split("next page: --page-token=")[1].strip()
        rest = self.ok("roles", "closed", "--project", project,
                       "--page-size=2", "--page-token=" + token)
        self.assertEqual(sum(scope in rest for scope in scopes), 1)
        self.assertNotIn("next page", rest)
        one = json.loads(self.ok("--json", "roles", "closed", "--project",
                                 project, "--scope", scopes[2]))
        self.assertEqual(len(one["closedScopes"]), 1)
        self.assertEqual(one["closedScopes"][0]["reason"], "done 2")
        self.fails(INVALID_ARGUMENT, "PAGE_TOKEN_INVALID", "roles", "closed",
                   "--page-token=" + token)
        self.fails(INVALID_ARGUMENT, "PROJECT_ID_INVALID", "roles", "closed",
                   "--project=prj_short")
        self.fails(USAGE, None, "roles", "closed", "--page-size=many")

    # ---- candidates ----

    def test_candidates_add_and_list(self):
        self.register("ctl-candidate", project=PROJECT,
                      capabilities=["role:cto:candidate"])
        added = json.loads(self.ok("--json", "candidates", "add", CTO_WIRE,
                                   "ctl-candidate", "--priority=7"))
        self.assertEqual(added["candidate"]["priority"], "7")
        out = self.ok("candidates", "list", "--project", PROJECT, "--kind=cto")
        self.assertIn("ctl-candidate", out)
        self.fails(INVALID_ARGUMENT, "AGENT_ID_INVALID", "candidates", "add",
                   CTO_WIRE, "x")
        self.fails(INVALID_ARGUMENT, "SCOPE_REQUIRED", "candidates", "list",
                   "--project", PROJECT, "--kind=lead")

    # ---- messages ----

    def test_publish_pending_and_ack(self):
        self.register("ctl-inbox")
        published = json.loads(self.ok("--json", "publish", "ctl-inbox",
                                       "--from=ctl-sender", "--priority=5",
                                       "--payload", '{"task": "build"}'))
        message_id = published["messageId"]
        self.assertIn(message_id, self.ok("pending", "ctl-inbox"))
        pending = json.loads(self.ok("--json", "pending", "ctl-inbox"))
        self.assertEqual(pending["deliveries"][0]["message"]["payload"],
                         {"task": "build"})
        # Peeking changed nothing: the message was never delivered, so an ACK
        # ignores it; listing with --mark-delivered delivers it.
        ignored = json.loads(self.ok("--json", "ack", "ctl-inbox", message_id))
        self.assertEqual(ignored["result"]["ignoredMessageIds"], [message_id])
        self.ok("pending", "ctl-inbox", "--mark-delivered")
        acked = json.loads(self.ok("--json", "ack", "ctl-inbox", message_id))
        self.assertEqual(acked["result"]["ackedMessageIds"], [message_id])
        self.assertNotIn(message_id, self.ok("pending", "ctl-inbox"))
        self.fails(INVALID_ARGUMENT, "PRIORITY_INVALID", "publish", "ctl-inbox",
                   "--from=ctl-sender", "--priority=12")
        self.fails(USAGE, None, "publish", "ctl-inbox", "--payload=[1")
        self.fails(NOT_FOUND, "AGENT_NOT_FOUND", "pending", "ctl-nobody")
        self.fails(INVALID_ARGUMENT, "MESSAGE_ID_INVALID", "ack", "ctl-inbox",
                   "m" * 65)

    def test_dead_letters(self):
        listed = json.loads(self.ok("--json", "dead-letters"))
        self.assertIsInstance(listed, dict)
        self.assertIn("MESSAGE_ID", self.ok("dead-letters"))
        self.fails(INVALID_ARGUMENT, "REQUEST_INVALID", "dead-letters",
                   "--page-size=-1")

    def test_dead_letters_redrive_queues_a_dead_letter_again_once(self):
        message_id = dead_letter(self, "ctl-redrive")
        self.assertNotIn(message_id, self.ok("pending", "ctl-redrive"))

        out = self.ok("dead-letters", "redrive", message_id)
        self.assertIn("was:", out)
        self.assertIn("ttl_expired", out)
        self.assertIn("recipients:", out)
        self.assertIn("ctl-redrive", out)
        self.assertIn(message_id, self.ok("pending", "ctl-redrive"))
        self.assertNotIn(message_id, self.ok("dead-letters"))
        self.fails(FAILED_PRECONDITION, "MESSAGE_NOT_DEAD_LETTER",
                   "dead-letters", "redrive", message_id)
        self.fails(INVALID_ARGUMENT, "MESSAGE_ID_INVALID",
                   "dead-letters", "redrive", "m" * 65)
        self.fails(USAGE, None, "dead-letters", "redrive")



class HubctlInboxLimitTest(unittest.TestCase):
    """hubctl against a hubd whose inboxes hold one pending message."""
    ctl, ok, fails, register = (HubctlTest.ctl, HubctlTest.ok, HubctlTest.fails,
                                HubctlTest.register)

    @classmethod
    def setUpClass(cls):
        cls.hubd = hubtest.Hubd(os.path.join(hubtest.tmpdir(), "hubctl-limit.sqlite"),
                                "--max_pending_per_inbox=1")
        cls.channel = grpc.insecure_channel(cls.hubd.address)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.hubd.stop()

    def test_dead_letters_redrive_to_a_full_inbox_is_refused_as_a_publish(self):
        message_id = dead_letter(self, "ctl-full")
        waiting = json.loads(self.ok("--json", "publish", "ctl-full",
                                     "--from=ctl-sender"))["messageId"]

        err = json.loads(self.fails(RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED",
                                    "dead-letters", "redrive", message_id))
        self.assertEqual(err["metadata"]["limit"], "max_pending_per_inbox")
        self.assertEqual(err["metadata"]["limit_value"], "1")
        self.assertEqual(err["metadata"]["agent_id"], "ctl-full")
        self.assertIn(message_id, self.ok("dead-letters"))
        pending = self.ok("pending", "ctl-full")
        self.assertIn(waiting, pending)
        self.assertNotIn(message_id, pending)
        # A publish to that inbox is refused the same way.
        self.fails(RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED", "publish", "ctl-full",
                   "--from=ctl-sender")


if __name__ == "__main__":
    hubtest.run_tests()

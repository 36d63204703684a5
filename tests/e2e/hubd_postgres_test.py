#!/usr/bin/python3
"""hubd on a real PostgreSQL server the test starts (fsync and
synchronous_commit on), through the public API only:

- durability: concurrent clients register agents, publish and ack; every
  acknowledged write is recorded; hubd is killed with SIGKILL mid-load (and,
  separately, PostgreSQL is stopped with `pg_ctl stop -m immediate`
  mid-load); afterwards every acknowledged write is there;
- an outage of the database while hubd runs: calls answer UNAVAILABLE /
  STORE_UNAVAILABLE, hubd keeps running, and serves again once the server is
  back, without a restart;
- `hubctl db copy` of a SQLite database a real hubd wrote, then a hubd on the
  copy answers as a hubd on the SQLite file does;
- refusals at start (a malformed URL, an unreachable server, a newer schema):
  exit status 1, a message naming the reason and the database, never the
  password;
- two hubds on one database: both start, an agent registered through one is
  seen through the other, and a CompareAndSetRole race through both has
  exactly one winner per version;
- role changes across hubds: a WatchRoles stream on each of two hubds sees
  every change written through either (reservations and compare-and-sets
  from both at once, a closed scope), each version once and in order, and a
  candidate attached to one hubd gets the role_change event of a change
  written through the other."""
import os
import queue
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hubtest  # noqa: E402
from hubtest import (ACK, GET_AGENT, PENDING, PUBLISH, REGISTER, TRACE,  # noqa: E402
                     guards, wait_for)

PROJECT = "prj_AAAAAAAAAAAAAAAAAAAAAA"
SCOPE = "scp_AAAAAAAAAAAAAAAAAAAAAA"
PASSWORD = "s3cret-pw-never-shown"
RESERVE = "hub.v1.RoleService/ReserveRole"
CAS = "hub.v1.RoleService/CompareAndSetRole"
GET_ROLE = "hub.v1.RoleService/GetRole"
CANDIDATES = "hub.v1.RoleService/ListRoleCandidates"
UPSERT_CANDIDATE = "hub.v1.RoleService/UpsertRoleCandidate"
CLOSE_SCOPE = "hub.v1.RoleService/CloseRoleScope"
WATCH = "hub.v1.RoleService/WatchRoles"
ATTACH = "hub.v1.PresenceService/Attach"


def hubctl_path():
    return os.path.abspath(os.environ["HUBCTL"])


def lead_key(scope=SCOPE):
    return {"projectId": PROJECT, "kind": "ROLE_KIND_LEAD", "scopeId": scope}


def cto_key():
    return {"projectId": PROJECT, "kind": "ROLE_KIND_CTO"}


class StreamReader:
    """A stream read on a thread of its own: `take(item, arrived)` records
    each answer (with its monotonic arrival time) under `cond`."""

    def __init__(self, stream):
        self.stream = stream
        self.cond = threading.Condition()
        self.error = None
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for item in self.stream:
                arrived = time.monotonic()
                with self.cond:
                    self.take(item, arrived)
                    self.cond.notify_all()
        except hubtest.ApiError as e:
            with self.cond:
                self.error = e
                self.cond.notify_all()

    def wait(self, what, predicate, timeout=60):
        """Waits until `predicate(self)` holds (called with the lock held)."""
        with self.cond:
            if not self.cond.wait_for(lambda: self.error or predicate(self), timeout):
                raise AssertionError("timed out after %d s waiting for %s" % (timeout, what))
            if self.error:
                raise AssertionError("the stream ended: %s" % self.error)

    def close(self):
        self.stream.cancel()
        self.thread.join(timeout=30)


class Watcher(StreamReader):
    """A WatchRoles stream: the snapshot (by wire), then every change with
    the monotonic time it arrived."""

    def __init__(self, api, body):
        self.snapshot = {}
        self.snapshot_done = False
        self.changes = []  # (arrival, RoleChange as a dict)
        super().__init__(api.stream(WATCH, body, timeout=600))

    def take(self, item, arrived):
        if "snapshotEnd" in item:
            self.snapshot_done = True
        elif not self.snapshot_done:
            role = item["change"]["role"]
            self.snapshot[role["roleKeyWire"]] = role
        else:
            self.changes.append((arrived, item["change"]))

    def of(self, wire):
        """The changes of one role, in arrival order."""
        with self.cond:
            return [c for _, c in self.changes if c["role"]["roleKeyWire"] == wire]


class AttachedAgent(StreamReader):
    """A presence stream of a registered agent: role probes are answered
    ready, role_change events are kept."""

    def __init__(self, api, agent_id, generation):
        self.frames = queue.Queue()
        self.attached = False
        self.role_changes = []
        self.frames.put({"frameId": "1", "hello": {"agentId": agent_id,
                                                   "presenceGeneration": generation}})
        super().__init__(api.bidi(ATTACH, iter(self.frames.get, None), timeout=600))

    def take(self, frame, arrived):
        event = frame.get("event", {})
        if "roleProbe" in event:
            self.frames.put({"probeReply": {"probeId": event["roleProbe"]["probeId"],
                                            "ready": True}})
        if "attached" in frame:
            self.attached = True
        if "roleChange" in event:
            self.role_changes.append(event["roleChange"])

    def close(self):
        self.frames.put(None)
        super().close()


def version(role):
    return int(role.get("version", "0"))


class HubdPostgresTest(hubtest.AcknowledgedWrites, hubtest.PostgresTestCase):
    DURABLE = True  # fsync and synchronous_commit on: the crash tests need them

    def hubd(self, url=None, *args):
        return super().hubd(url or self.url, *args)

    # ---- durability ----------------------------------------------------------

    def test_a_killed_hubd_loses_no_acknowledged_write(self):
        hubd = self.hubd()
        load = self.run_load_until(hubd, "kill", lambda: hubd.proc.send_signal(signal.SIGKILL))
        self.assertEqual(hubd.proc.wait(timeout=30), -signal.SIGKILL)
        for _, error in load.failures:
            self.assertEqual(error.code, "UNAVAILABLE", str(error))
        after = self.hubd()
        self.check_every_acknowledged_write(self.api(after), load)
        print("kill -9 hubd: %d writes acknowledged (%d agents, %d messages, %d acked) "
              "all found by a new hubd" % (load.acknowledged, len(load.acked_generation),
                                           len(load.published), len(load.acked)))

    def test_postgres_stopped_immediately_loses_no_acknowledged_write(self):
        hubd = self.hubd()
        load = self.run_load_until(hubd, "immediate",
                                   lambda: self.pg.stop_server("immediate"))
        for _, error in load.failures:
            self.assert_in_flight_lost(error, "a write while PostgreSQL is down")
        self.assertIsNone(hubd.proc.poll(), "hubd exited when PostgreSQL went away")
        self.pg.start()
        # The same hubd serves again: its writer and readers reconnect. Until
        # then, every answer is STORE_UNAVAILABLE.
        api = self.api(hubd)
        errors = []

        def registers():
            try:
                return api.call(REGISTER, {"agentId": "session:after-restart",
                                           "cli": "AGENT_CLI_CLAUDE"})
            except hubtest.ApiError as e:
                errors.append(e)
                return None

        wait_for("hubd to write again", registers)
        for e in errors:
            self.assert_unavailable_or_seat_lost(e, "a write after PostgreSQL came back")
        statuses = self.check_every_acknowledged_write(api, load)
        self.assertIsNone(hubd.proc.poll())
        # And what the database holds (not what this hubd remembers): a new
        # hubd on it finds the same.
        hubd.stop()
        fresh = self.check_every_acknowledged_write(self.api(self.hubd()), load)
        self.assertEqual(fresh, statuses)
        print("pg_ctl stop -m immediate: %d writes acknowledged, all committed; the "
              "running hubd served again after %d failed attempts" %
              (load.acknowledged, len(errors)))

    # ---- the database going away while hubd runs ---------------------------

    def test_an_outage_answers_store_unavailable_and_recovers(self):
        hubd = self.hubd()
        api = self.api(hubd)
        api.call(REGISTER, {"agentId": "session:before", "cli": "AGENT_CLI_CLAUDE",
                            "heartbeatTtl": "7200s"})
        sent = api.call(PUBLISH, {"fromAgentId": "session:before", "to": "session:before"})
        api.call(RESERVE, {"roleKey": lead_key(), "patch": {"state": "ROLE_STATE_ELECTABLE"}})
        calls = [
            (REGISTER, {"agentId": "session:during", "cli": "AGENT_CLI_CODEX"}),
            (REGISTER, {"agentId": "session:before", "cli": "AGENT_CLI_CLAUDE",
                        "heartbeatTtl": "7200s"}),
            (PUBLISH, {"fromAgentId": "session:before", "to": "session:before"}),
            (RESERVE, {"roleKey": lead_key("scp_BBBBBBBBBBBBBBBBBBBBBB")}),
            (UPSERT_CANDIDATE, {"roleKey": lead_key(), "agentId": "session:before",
                                "candidate": {"source": "CANDIDATE_SOURCE_GRANT"}}),
            (GET_AGENT, {"agentId": "session:before"}),
            (GET_ROLE, {"roleKey": lead_key()}),
            (PENDING, {"agentId": "session:before", "peek": True}),
            (TRACE, {"traceId": sent["traceId"]}),
        ]
        self.pg.stop_server("fast")
        served_from_memory = []
        for method, body in calls:
            try:
                api.call(method, body)
                served_from_memory.append(method)
            except hubtest.ApiError as e:
                self.assert_unavailable(e, method)
        # Every write needs the database.
        self.assertEqual([m for m in served_from_memory
                          if m in (REGISTER, PUBLISH, RESERVE, UPSERT_CANDIDATE)], [])
        # A generic client sees the same (buf curl prints the status).
        code, _, err = hubtest.buf_curl(hubd.address, REGISTER,
                                        {"agentId": "session:curl", "cli": "AGENT_CLI_CODEX"})
        self.assertNotEqual(code, 0)
        self.assertEqual(hubtest.error_info(err)[0], "unavailable", err)
        self.assertEqual(hubtest.error_info(err)[1].get("reason"), "STORE_UNAVAILABLE", err)
        self.assertIsNone(hubd.proc.poll(), "hubd exited during the outage")

        self.pg.start()
        for method, body in calls:
            errors = []

            def succeeds():
                try:
                    return api.call(method, body) or True
                except hubtest.ApiError as e:
                    errors.append(e)
                    return False

            wait_for(method + " to succeed again", succeeds)
            for e in errors:
                self.assert_unavailable_or_seat_lost(e, method + " after the outage")
        agent = api.call(GET_AGENT, {"agentId": "session:before"})["agent"]
        self.assertEqual(agent["presenceGeneration"], "2")
        self.assertIsNone(hubd.proc.poll())
        print("outage: reads served from memory while PostgreSQL was down: %s" %
              (served_from_memory or "none"))

    # ---- copy a SQLite database, then serve it ------------------------------

    def answers(self, api, agents, inboxes, roles):
        """What a hub says of the given agents, inboxes and roles, without the
        answer's own time."""
        out = {}
        for agent in agents:
            out["agent " + agent] = api.call(GET_AGENT, {"agentId": agent})["agent"]
        for inbox in inboxes:
            page = api.call(PENDING, {"agentId": inbox, "peek": True, "pageSize": 100})
            out["pending " + inbox] = page.get("deliveries", [])
        for name, key in roles.items():
            out["role " + name] = api.call(GET_ROLE, {"roleKey": key})["role"]
            out["candidates " + name] = api.call(
                CANDIDATES, {"roleKey": key}).get("candidates", [])
        return out

    def test_a_copied_sqlite_database_is_served_as_sqlite_served_it(self):
        live = os.path.join(self.dir, "live.sqlite")
        sqlite_hubd = hubtest.Hubd(live)
        self.addCleanup(sqlite_hubd.stop, signal.SIGKILL)
        api = hubtest.Api(sqlite_hubd.address)
        agents = ["session:agent-%d" % i for i in range(4)]
        for i, agent in enumerate(agents):
            api.call(REGISTER, {"agentId": agent, "cli": "AGENT_CLI_CLAUDE",
                                "heartbeatTtl": "7200s", "projectId": PROJECT,
                                "topics": ["builds"], "metadata": {"n": i}})
        api.call(REGISTER, {"agentId": agents[0], "cli": "AGENT_CLI_CLAUDE",
                            "heartbeatTtl": "7200s", "projectId": PROJECT})  # generation 2
        # The CTO role held by agent-0 (reserved for it, then active), with
        # two candidates; a lead role electable with one; a role held by
        # agent-2 that stopped answering (unreachable).
        lease = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        cto = api.call(RESERVE, {"roleKey": cto_key(), "patch": {
            "state": "ROLE_STATE_ELECTED_PROBING", "holderAgentId": agents[0],
            "holderLeaseExpiresAt": lease, "lastReason": "operator"}})["role"]
        api.call(CAS, {"roleKey": cto_key(), **guards(cto),
                       "patch": {"state": "ROLE_STATE_ACTIVE", "lastReason": "activation_acked"}})
        for agent, source in ((agents[0], "GRANT"), (agents[1], "STANDUP")):
            api.call(UPSERT_CANDIDATE, {"roleKey": cto_key(), "agentId": agent, "candidate": {
                "source": "CANDIDATE_SOURCE_" + source, "priority": "5"}})
        # The lead role of scope A, electable but blocked by an operator
        # (so the activator leaves it alone), with a candidate.
        api.call(RESERVE, {"roleKey": lead_key(), "patch": {
            "state": "ROLE_STATE_ELECTABLE", "blockedReason": "maintenance"}})
        api.call(UPSERT_CANDIDATE, {"roleKey": lead_key(), "agentId": agents[3],
                                    "candidate": {"source": "CANDIDATE_SOURCE_GRANT"}})
        # The lead role of scope B, held by agent-2, which stopped answering:
        # unreachable, next probe in an hour.
        other = lead_key("scp_BBBBBBBBBBBBBBBBBBBBBB")
        held = api.call(RESERVE, {"roleKey": other, "patch": {
            "state": "ROLE_STATE_ELECTED_PROBING", "holderAgentId": agents[2],
            "holderLeaseExpiresAt": lease}})["role"]
        api.call(CAS, {"roleKey": other, **guards(held), "patch": {
            "state": "ROLE_STATE_UNREACHABLE", "lastReason": "probe_failed",
            "nextProbeAt": lease, "retryCount": "2"}})
        # Messages: some delivered, some of those acked, one to a topic.
        ids = [api.call(PUBLISH, {"fromAgentId": agents[1], "to": agents[2], "priority": p,
                                  "payload": {"n": p, "text": "tab\there"}})["messageId"]
               for p in (3, 5, 7, 9)]
        api.call(PUBLISH, {"fromAgentId": agents[0], "to": "topic:builds"})
        api.call(PENDING, {"agentId": agents[2], "pageSize": 3})  # 3 delivered
        api.call(ACK, {"agentId": agents[2], "presenceGeneration": "1",
                       "messageIds": ids[2:]})
        roles = {"cto": cto_key(), "lead": lead_key(), "unreachable": other}
        before = self.answers(api, agents, agents, roles)
        api.close()
        self.assertEqual(before["role cto"]["state"], "ROLE_STATE_ACTIVE")
        self.assertEqual(len(before["candidates cto"]), 2)
        backup = os.path.join(self.dir, "backup.sqlite")
        r = subprocess.run([hubctl_path(), "--addr=" + sqlite_hubd.address, "backup",
                            "--out=" + backup], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        sqlite_hubd.stop()

        r = subprocess.run([hubctl_path(), "db", "copy", "--from=" + backup,
                            "--to=" + self.url], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        # A hub restarted on the SQLite file and a hub on its PostgreSQL copy.
        restarted = hubtest.Hubd(backup)
        self.addCleanup(restarted.stop, signal.SIGKILL)
        hubs = {"sqlite": self.api(restarted), "postgres": self.api(self.hubd())}
        after = {}
        for name, hub_api in hubs.items():
            # Recovery never restores `active`: the live holder is probed again
            # under a new epoch, the probe fails (agent-0 has neither stream
            # nor transport) and the activator retries with backoff. Both hubs
            # do that alike; what the retries change is left out below.
            role = wait_for(name + " hub's re-probe of the CTO", lambda: (lambda r: r if (
                r.get("lastReason") == "target_not_found") else None)(
                    hub_api.call(GET_ROLE, {"roleKey": cto_key()})["role"]))
            self.assertEqual(role.get("previousHolderAgentId",
                                      role.get("holderAgentId")), agents[0], name)
            self.assertGreaterEqual(int(role["epoch"]), 1, name)
            # The activator's pass over the lead role at start: its candidate
            # cannot be reached either (no_candidate replaces the operator's
            # blocked reason).
            wait_for(name + " hub's pass over the lead role", lambda: hub_api.call(
                GET_ROLE, {"roleKey": lead_key()})["role"].get("lastReason") == "no_candidate")
            answer = self.answers(hub_api, agents, agents, roles)
            answer.pop("role cto")
            answer["role lead"].pop("lastTransitionAt")
            answer["candidates cto"] = [
                {k: v for k, v in c.items() if k in ("agentId", "source", "priority",
                                                     "roleKeyWire", "updatedAt")}
                for c in answer["candidates cto"]]
            for agent in agents:
                # Leases are renewed as of the start, on both stores.
                answer["agent " + agent].pop("leaseExpiresAt")
            after[name] = answer
        self.assertEqual(after["postgres"], after["sqlite"])
        # The rest reads back exactly as the first hub served it.
        for agent in agents:
            before["agent " + agent].pop("leaseExpiresAt")
        lead = dict(before["role lead"], blockedReason="no_candidate",
                    lastReason="no_candidate", version="1")
        lead.pop("lastTransitionAt")
        self.assertEqual(after["postgres"]["role lead"], lead)
        for key, value in after["postgres"].items():
            if key not in ("candidates cto", "role lead"):
                self.assertEqual(value, before[key], key)
        self.assertEqual(sorted(c["agentId"] for c in after["postgres"]["candidates cto"]),
                         agents[:2])
        # agent-2: two direct messages left (one delivered) and the topic one.
        self.assertEqual(len(after["postgres"]["pending " + agents[2]]), 3)
        # The topic message reached the subscribers of "builds" (agent-0's
        # second registration named no topics).
        self.assertEqual(len(after["postgres"]["pending " + agents[1]]), 1)
        self.assertEqual(after["postgres"]["pending " + agents[0]], [])

    # ---- refusals at start ---------------------------------------------------

    def refused(self, url, *expected):
        r = subprocess.run([hubtest.hubd_path(), "--listen=127.0.0.1:0", "--db=" + url],
                           capture_output=True, text=True, timeout=60)
        output = r.stdout + r.stderr
        self.assertEqual(r.returncode, 1, output)
        self.assertNotIn("serving on", output)
        self.assertNotIn(PASSWORD, output)
        for text in expected:
            self.assertIn(text, output)
        return output

    def test_bad_databases_are_refused_naming_them_without_the_password(self):
        malformed = self.refused("postgresql://hub:%s@[::1/hub" % PASSWORD,
                                 "not a PostgreSQL connection string")
        absent = self.refused("postgresql://hub:%s@/nowhere?host=/nonexistent-dir" % PASSWORD,
                              "database user=hub dbname=nowhere host=/nonexistent-dir",
                              "cannot connect")
        refused_port = self.refused("postgresql://hub:%s@127.0.0.1:1/hub" % PASSWORD,
                                    "database user=hub dbname=hub host=127.0.0.1 port=1",
                                    "Connection refused")
        # A database a newer hub migrated.
        first = self.hubd()
        first.stop()
        self.pg.sql(self.database,
                    "UPDATE hub_meta SET value = '99' WHERE key = 'hub_schema_version'")
        url = "postgresql://hub:%s@/%s?host=%s" % (PASSWORD, self.database, self.pg.dir)
        newer = self.refused(url, "database user=hub dbname=%s host=%s" % (
            self.database, self.pg.dir), "99")
        self.assertEqual(self.pg.sql(self.database, "SELECT value FROM hub_meta WHERE "
                                     "key = 'hub_schema_version'"), "99")
        for output in (malformed, absent, refused_port, newer):
            print(output.strip())

    # ---- two hubds on one database ------------------------------------------

    def two_hubds(self):
        """Two hubds started at once over this test's empty database."""
        started = [None, None]
        errors = []

        def start(i):
            try:
                started[i] = self.hubd()
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)

        threads = [threading.Thread(target=start, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=90)
        self.assertEqual(errors, [])
        return started

    def test_two_hubds_share_one_database(self):
        started = self.two_hubds()
        a, b = (self.api(h) for h in started)
        # storage/pg/pg_schema.h kPgSchemaVersion.
        self.assertEqual(self.pg.sql(self.database, "SELECT value FROM hub_meta WHERE "
                                     "key = 'hub_schema_version'"), "12")
        status_a = a.call("hub.v1.HubService/GetStatus")
        status_b = b.call("hub.v1.HubService/GetStatus")
        self.assertEqual(status_a.get("storeFingerprint"), status_b.get("storeFingerprint"))
        for h in started:  # libpq's notices stay out of hubd's structured log
            self.assertNotIn("NOTICE:", h.stderr())

        registered = a.call(REGISTER, {"agentId": "session:via-a", "cli": "AGENT_CLI_CLAUDE",
                                       "heartbeatTtl": "7200s"})
        seen = b.call(GET_AGENT, {"agentId": "session:via-a"})["agent"]
        self.assertEqual(seen["presenceGeneration"], registered["presenceGeneration"])
        self.assertEqual(seen["cli"], "AGENT_CLI_CLAUDE")
        # Re-registered through the other hub: the generation moves on.
        again = b.call(REGISTER, {"agentId": "session:via-a", "cli": "AGENT_CLI_CLAUDE",
                                  "heartbeatTtl": "7200s"})
        self.assertEqual(int(again["presenceGeneration"]),
                         int(registered["presenceGeneration"]) + 1)
        self.assertEqual(a.call(GET_AGENT, {"agentId": "session:via-a"})["agent"]
                         ["presenceGeneration"], again["presenceGeneration"])

        # One role, written through both hubs at once with the same guards.
        a.call(RESERVE, {"roleKey": lead_key(), "patch": {"state": "ROLE_STATE_ELECTABLE"}})
        rounds = 12
        for n in range(rounds):
            role = (a if n % 2 else b).call(GET_ROLE, {"roleKey": lead_key()})["role"]
            self.assertEqual(int(role.get("version", "0")), n)
            barrier = threading.Barrier(2)
            outcomes = [None, None]

            def cas(i, api):
                barrier.wait(timeout=30)
                try:
                    api.call(CAS, {"roleKey": lead_key(), **guards(role),
                                   "patch": {"lastReason": "hub_%d_round_%d" % (i, n)}})
                    outcomes[i] = "won"
                except hubtest.ApiError as e:
                    outcomes[i] = e

            racers = [threading.Thread(target=cas, args=(i, api))
                      for i, api in enumerate((a, b))]
            for t in racers:
                t.start()
            for t in racers:
                t.join(timeout=60)
            winners = [i for i, o in enumerate(outcomes) if o == "won"]
            self.assertEqual(len(winners), 1, "round %d: %s" % (n, outcomes))
            loser = outcomes[1 - winners[0]]
            self.assertEqual(loser.code, "ABORTED", str(loser))
            self.assertIn(loser.reason, ("STALE_VERSION", "CAS_CONFLICT"), str(loser))
            for api in (a, b):
                now = api.call(GET_ROLE, {"roleKey": lead_key()})["role"]
                self.assertEqual(now["version"], str(n + 1))
                self.assertEqual(now["lastReason"], "hub_%d_round_%d" % (winners[0], n))


    # ---- role changes across hubds ---------------------------------------------

    def watcher(self, api, body):
        w = Watcher(api, body)
        self.addCleanup(w.close)
        w.wait("the snapshot", lambda w: w.snapshot_done)
        return w

    def test_watches_on_both_hubds_see_every_change_through_either_in_order(self):
        hubds = self.two_hubds()
        a, b = (self.api(h) for h in hubds)
        keys = {"cto": cto_key(), "lead": lead_key()}
        wires = {}
        for name, key in keys.items():
            wires[name] = a.call(RESERVE, {"roleKey": key, "patch": {
                "state": "ROLE_STATE_ELECTABLE"}})["role"]["roleKeyWire"]
        watchers = {"a": self.watcher(a, {"projectId": PROJECT}),
                    "b": self.watcher(b, {"projectId": PROJECT})}
        for w in watchers.values():
            self.assertEqual(sorted(w.snapshot), sorted(wires.values()))
            self.assertEqual({version(r) for r in w.snapshot.values()}, {0})

        # Two writers per hubd, at once, on both roles: compare-and-sets with
        # the guards they read, and now and then a reservation (epoch + 1)
        # guarded by the version; losers are refused, never failed.
        errors = []

        def writer(hub, api, n):
            try:
                for i in range(30):
                    name = ("cto", "lead")[(n + i) % 2]
                    role = api.call(GET_ROLE, {"roleKey": keys[name]})["role"]
                    tag = "%s-w%d-%d" % (hub, n, i)
                    try:
                        if i % 7 == 6:
                            api.call(RESERVE, {"roleKey": keys[name],
                                               "expectedVersion": str(version(role)),
                                               "patch": {"state": "ROLE_STATE_ELECTABLE",
                                                         "lastReason": tag}})
                        else:
                            api.call(CAS, {"roleKey": keys[name], **guards(role),
                                           "patch": {"lastReason": tag}})
                    except hubtest.ApiError as e:
                        if e.reason not in ("STALE_VERSION", "STALE_EPOCH", "CAS_CONFLICT"):
                            raise
            except Exception as e:  # noqa: BLE001 (reported below)
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(hub, api, n))
                   for hub, api in (("a", a), ("b", b)) for n in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        self.assertEqual(errors, [])
        final_cto = a.call(GET_ROLE, {"roleKey": keys["cto"]})["role"]
        closed = b.call(CLOSE_SCOPE, {"roleKey": keys["lead"], "reason": "done"})
        self.assertTrue(closed.get("roleRemoved"))
        last_lead = closed["removedRole"]

        for hub, w in watchers.items():
            w.wait("the newest cto version on hub %s" % hub, lambda w: any(
                version(c["role"]) == version(final_cto)
                for _, c in w.changes if c["role"]["roleKeyWire"] == wires["cto"]))
            w.wait("the lead's removal on hub %s" % hub, lambda w: any(
                c["kind"] == "ROLE_CHANGE_KIND_REMOVED" for _, c in w.changes))
            cto = w.of(wires["cto"])
            self.assertEqual([version(c["role"]) for c in cto],
                             list(range(1, version(final_cto) + 1)), "hub %s" % hub)
            self.assertEqual({c["kind"] for c in cto}, {"ROLE_CHANGE_KIND_UPDATED"})
            self.assertEqual(cto[-1]["role"], final_cto)
            lead = w.of(wires["lead"])
            self.assertEqual([version(c["role"]) for c in lead[:-1]],
                             list(range(1, version(last_lead) + 1)), "hub %s" % hub)
            self.assertEqual(lead[-1]["kind"], "ROLE_CHANGE_KIND_REMOVED")
            self.assertEqual(version(lead[-1]["role"]), version(last_lead))
            # Written through both hubds, seen through this one.
            reasons = {c["role"].get("lastReason", "")[:1] for c in cto + lead}
            self.assertTrue({"a", "b"} <= reasons, reasons)

    def test_a_change_through_one_hubd_reaches_a_candidate_attached_to_the_other(self):
        hubds = self.two_hubds()
        a, b = (self.api(h) for h in hubds)
        agent = "session:candidate-on-a"
        registered = a.call(REGISTER, {"agentId": agent, "cli": "AGENT_CLI_CLAUDE",
                                       "capabilities": ["role:lead:candidate"],
                                       "projectId": PROJECT, "heartbeatTtl": "120s"})
        b.call(RESERVE, {"roleKey": lead_key(), "patch": {"state": "ROLE_STATE_ELECTABLE"}})
        attached = AttachedAgent(a, agent, registered["presenceGeneration"])
        self.addCleanup(attached.close)
        attached.wait("attached", lambda s: s.attached)
        a.call(UPSERT_CANDIDATE, {"roleKey": lead_key(), "agentId": agent,
                                  "candidate": {"priority": "10"}})
        role = b.call(GET_ROLE, {"roleKey": lead_key()})["role"]
        changed = b.call(CAS, {"roleKey": lead_key(), **guards(role),
                               "patch": {"lastReason": "through b"}})["role"]
        attached.wait("the role_change event on hub a", lambda s: any(
            c["role"].get("lastReason") == "through b" for c in s.role_changes))
        notice = [c for c in attached.role_changes
                  if c["role"].get("lastReason") == "through b"]
        self.assertEqual(len(notice), 1)
        self.assertEqual(notice[0]["kind"], "ROLE_CHANGE_KIND_UPDATED")
        self.assertEqual(notice[0]["role"], changed)
        self.assertEqual(notice[0]["previousState"], "ROLE_STATE_ELECTABLE")


if __name__ == "__main__":
    hubtest.run_tests()

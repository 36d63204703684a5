#!/usr/bin/python3
"""`hubctl db copy` / `db verify` against a real PostgreSQL server the test
starts: a database whose every table a real hubd populated arrives row for
row; a triflux file is copied without being touched; a live hubd's file is
refused (its backup is copied instead); a target with hub data is refused;
a row changed in PostgreSQL afterwards is found; every failure exits with
its code and reason."""
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hubtest  # noqa: E402

PROJECT = "prj_AAAAAAAAAAAAAAAAAAAAAA"
SCOPE = "scp_AAAAAAAAAAAAAAAAAAAAAA"
TOKEN = "copy-test-admin-token-0123456789"
TABLES = ["agents", "messages", "message_inbox", "dead_letters", "role_registry",
          "role_candidates", "hub_agent_owners", "hub_closed_scopes",
          "hub_reservation_tokens", "hub_reservations", "hub_reservation_patterns"]
# Copied too; populate_through_hubd writes no job, so a copy of its file
# reports them empty.
JOB_TABLES = ["assign_jobs", "hub_job_dependencies", "hub_job_late_results",
              "hub_job_attempts"]


def hubctl_path():
    return os.path.abspath(os.environ["HUBCTL"])


def _field(number, payload):
    data = payload.encode()
    return bytes([number << 3 | 2, len(data)]) + data


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def sqlite_counts(path):
    db = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        return {t: db.execute("SELECT count(*) FROM " + t).fetchone()[0] for t in TABLES}
    finally:
        db.close()


# triflux's schema v8 (TRIFLUX-HUB.md §1), as storage/sqlite/migrations_test.cc
# builds it, with one of triflux's own tables.
TRIFLUX_V8 = """
CREATE TABLE _meta (key TEXT PRIMARY KEY, value TEXT);
INSERT INTO _meta VALUES ('schema_version', '8');
CREATE TABLE agents (agent_id TEXT PRIMARY KEY, cli TEXT NOT NULL CHECK (cli IN
 ('codex','gemini','claude','other')), pid INTEGER, capabilities_json TEXT NOT NULL
 DEFAULT '[]', topics_json TEXT NOT NULL DEFAULT '[]', last_seen_ms INTEGER NOT NULL,
 lease_expires_ms INTEGER NOT NULL, status TEXT NOT NULL CHECK (status IN
 ('online','stale','offline')), metadata_json TEXT NOT NULL DEFAULT '{}', project_id
 TEXT, session_id TEXT, host_id TEXT, transport_locators_json TEXT NOT NULL DEFAULT
 '[]', presence_generation INTEGER NOT NULL DEFAULT 0);
CREATE TABLE messages (id TEXT PRIMARY KEY, type TEXT NOT NULL, from_agent TEXT NOT
 NULL, to_agent TEXT NOT NULL, topic TEXT NOT NULL, priority INTEGER NOT NULL, ttl_ms
 INTEGER NOT NULL, created_at_ms INTEGER NOT NULL, expires_at_ms INTEGER NOT NULL,
 correlation_id TEXT NOT NULL, trace_id TEXT NOT NULL, payload_json TEXT NOT NULL
 DEFAULT '{}', status TEXT NOT NULL, role_key_wire TEXT);
CREATE INDEX idx_messages_status ON messages(status);
CREATE TABLE message_inbox (delivery_id INTEGER PRIMARY KEY AUTOINCREMENT, message_id
 TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE, agent_id TEXT NOT NULL,
 delivered_at_ms INTEGER, acked_at_ms INTEGER, attempts INTEGER NOT NULL DEFAULT 0,
 UNIQUE(message_id, agent_id));
CREATE TABLE dead_letters (message_id TEXT PRIMARY KEY, reason TEXT NOT NULL,
 failed_at_ms INTEGER NOT NULL, last_error TEXT);
CREATE TABLE role_registry (role_key_wire TEXT PRIMARY KEY, project_id TEXT NOT NULL,
 role_kind TEXT NOT NULL, scope_id TEXT NOT NULL DEFAULT '', state TEXT NOT NULL,
 holder_agent_id TEXT, previous_holder_agent_id TEXT, epoch INTEGER NOT NULL DEFAULT 0,
 activation_seq INTEGER NOT NULL DEFAULT 0, activation_id TEXT, activation_deadline_ms
 INTEGER, holder_lease_expires_ms INTEGER, charter_version TEXT, charter_acked_epoch
 INTEGER, retry_count INTEGER NOT NULL DEFAULT 0, next_probe_ms INTEGER, blocked_reason
 TEXT, last_transition_ms INTEGER NOT NULL, last_reason TEXT NOT NULL, version INTEGER
 NOT NULL DEFAULT 0, CHECK (state <> 'active' OR holder_agent_id IS NOT NULL),
 UNIQUE (project_id, role_kind, scope_id));
CREATE TABLE role_candidates (role_key_wire TEXT NOT NULL REFERENCES
 role_registry(role_key_wire) ON DELETE CASCADE, agent_id TEXT NOT NULL, source TEXT
 NOT NULL, priority INTEGER NOT NULL DEFAULT 0, transport_locators_json TEXT NOT NULL
 DEFAULT '[]', consecutive_probe_failures INTEGER NOT NULL DEFAULT 0, excluded_until_ms
 INTEGER, last_probe_ms INTEGER, last_probe_code TEXT, updated_at_ms INTEGER NOT NULL,
 PRIMARY KEY (role_key_wire, agent_id));
CREATE TABLE human_requests (request_id TEXT PRIMARY KEY, prompt TEXT NOT NULL);
INSERT INTO agents (agent_id, cli, pid, last_seen_ms, lease_expires_ms, status,
 metadata_json, project_id, transport_locators_json, presence_generation) VALUES
 ('cto-1', 'claude', 42, 1000, 999999999999, 'online', '{"a":"tab\there"}', 'prj_X',
  '[{"kind":"tmux"}]', 3),
 ('worker-1', 'codex', NULL, 2000, 3000, 'offline', '{}', NULL, '[]', 0);
INSERT INTO messages VALUES
 ('msg-1', 'event', 'cto-1', 'worker-1', 'build', 7, 1000, 10, 1010, 'c1', 't1',
  '{"x":"line\nbreak"}', 'queued', NULL),
 ('msg-2', 'handoff', 'worker-1', 'cto-1', 'done', 5, 1000, 20, 1020, 'c2', 't2', '{}',
  'dead_letter', NULL);
INSERT INTO message_inbox (message_id, agent_id, attempts) VALUES ('msg-1', 'worker-1', 1);
INSERT INTO dead_letters VALUES ('msg-2', 'ttl_expired', 1020, NULL);
INSERT INTO role_registry (role_key_wire, project_id, role_kind, scope_id, state,
 holder_agent_id, epoch, activation_seq, activation_id, last_transition_ms, last_reason,
 version) VALUES ('rk2.cto', 'prj_X', 'cto', '', 'elected-probing', 'cto-1', 3, 3,
 'act-3', 100, 'role_reserved', 4);
INSERT INTO role_candidates (role_key_wire, agent_id, source, updated_at_ms) VALUES
 ('rk2.cto', 'cto-1', 'grant', 100);
INSERT INTO human_requests VALUES ('hr-1', 'ok?');
"""


class DbCopyTest(hubtest.PostgresTestCase):

    def ctl(self, *args):
        r = subprocess.run([hubctl_path(), *args], capture_output=True, text=True,
                           timeout=300)
        return r.returncode, r.stdout, r.stderr

    def copy(self, path, *extra):
        return self.ctl("--json", "db", "copy", "--from=" + path, "--to=" + self.url, *extra)

    def triflux_file(self):
        path = os.path.join(self.dir, "triflux.db")
        db = sqlite3.connect(path)
        db.executescript(TRIFLUX_V8)
        db.close()
        return path

    def pg_counts(self):
        return {t: int(self.pg.sql(self.database, "SELECT count(*) FROM " + t))
                for t in TABLES}

    def populate_through_hubd(self, hubd):
        """Rows in every table, each written by the hub's own RPCs."""
        token_file = os.path.join(self.dir, "admin.token")
        with open(token_file, "w") as f:
            f.write(TOKEN + "\n")

        def ctl(*args):
            code, out, err = self.ctl("--addr=" + hubd.address, "--token_file=" + token_file,
                                      *args)
            self.assertEqual(code, 0, "%s: %s" % (args, err))
            return out

        channel = grpc.insecure_channel(hubd.address)
        register = channel.unary_unary("/hub.v1.PresenceService/RegisterAgent")
        for i in range(5):
            register(_field(1, "session:agent-%d" % i) + bytes([2 << 3, 3]), timeout=10,
                     metadata=(("authorization", "Bearer " + TOKEN),))
        channel.close()
        cto = json.loads(ctl("--json", "rolekey", "encode", "--project=" + PROJECT,
                             "--kind=cto"))["wire"]
        lead = json.loads(ctl("--json", "rolekey", "encode", "--project=" + PROJECT,
                              "--kind=lead", "--scope=" + SCOPE))["wire"]
        ctl("roles", "reserve", cto)
        ctl("candidates", "add", cto, "session:agent-0", "--priority=5")
        ctl("candidates", "add", cto, "session:agent-1", "--source=standup")
        ctl("roles", "reserve", lead)
        ctl("candidates", "add", lead, "session:agent-2")
        ids = []
        for i in range(4):
            out = ctl("--json", "publish", "session:agent-3", "--from=session:agent-4",
                      '--payload={"n":%d,"text":"tab\\there, newline\\n, back\\\\slash"}' % i)
            ids.append(json.loads(out)["messageId"])
        ctl("pending", "session:agent-3", "--mark-delivered")
        ctl("ack", "session:agent-3", ids[0], ids[1])
        # A role message waits as backlog; closing the scope dead-letters it.
        ctl("publish", "topic:role:" + lead, "--from=session:agent-4")
        ctl("roles", "close", lead, "--reason=done with it")
        ctl("reservations", "reserve", "src/**/*.cc", "docs", "--ttl=1h",
            "--agent=session:agent-0", "--project=" + PROJECT, "--reason=copy me")

    def test_every_table_a_real_hubd_wrote_arrives_row_for_row(self):
        live = os.path.join(self.dir, "live.sqlite")
        tokens = hubtest.write_tokens(os.path.join(self.dir, "tokens.json"),
                                      [(TOKEN, "root", "admin", ["*"])])
        hubd = hubtest.Hubd(live, "--token_file=" + tokens)
        self.addCleanup(hubd.stop)
        self.populate_through_hubd(hubd)

        # The live file is refused: the hub would go on writing after any copy.
        code, _, err = self.copy(live)
        self.assertEqual(code, 9, err)
        self.assertEqual(json.loads(err)["reason"], "DATABASE_LOCKED")
        self.assertIn("hubctl backup", err)
        # What the refusal suggests works: a backup of the live hub.
        backup = os.path.join(self.dir, "backup.sqlite")
        code, _, err = self.ctl("--addr=" + hubd.address, "--token_file=" +
                                os.path.join(self.dir, "admin.token"), "backup",
                                "--out=" + backup)
        self.assertEqual(code, 0, err)
        hubd.stop()

        expected = sqlite_counts(live)
        for table, rows in expected.items():
            self.assertGreater(rows, 0, "hubd wrote no row to " + table)
        before = sha256(live)
        code, out, err = self.copy(live)
        self.assertEqual(code, 0, err)
        report = json.loads(out)
        self.assertEqual({t: int(n) for t, n in report["tables"].items()},
                         dict(expected, **{t: 0 for t in JOB_TABLES}))
        self.assertEqual(int(report["rows"]), sum(expected.values()))
        self.assertFalse(report["migratedSnapshot"])
        self.assertEqual(self.pg_counts(), expected)
        self.assertEqual(sha256(live), before)
        self.assertEqual(self.pg.sql(self.database,
                                     "SELECT value FROM hub_meta WHERE key = "
                                     "'copied_from_sqlite'"), live)
        # The next delivery id follows the copied ones.
        top = self.pg.sql(self.database, "SELECT max(delivery_id) FROM message_inbox")
        self.assertEqual(self.pg.sql(
            self.database, "SELECT nextval(pg_get_serial_sequence('message_inbox', "
            "'delivery_id'))"), str(int(top) + 1))

        code, out, err = self.ctl("db", "verify", "--from=" + live, "--to=" + self.url)
        self.assertEqual(code, 0, err)
        self.assertIn("verified %d rows" % sum(expected.values()), out)

        # The backup holds the same rows and copies into a database of its own.
        self.database += "_b"
        self.pg.create_database(self.database)
        self.url = self.pg.url(self.database)
        code, out, err = self.copy(backup)
        self.assertEqual(code, 0, err)
        self.assertEqual(self.pg_counts(), expected)

    def test_a_triflux_file_is_copied_through_a_migrated_snapshot_untouched(self):
        path = self.triflux_file()
        before = sha256(path)
        code, out, err = self.ctl("db", "copy", "--from=" + path, "--to=" + self.url)
        self.assertEqual(code, 0, err)
        self.assertIn("triflux schema 8, migrated on a temporary copy", out)
        self.assertIn("not copied (not hub's tables): human_requests (1 rows)", out)
        self.assertEqual(sha256(path), before)
        self.assertEqual(sorted(os.listdir(self.dir)), ["triflux.db", "triflux.db.lock"])
        counts = self.pg_counts()
        self.assertEqual(counts["agents"], 2)
        self.assertEqual(counts["messages"], 2)
        self.assertEqual(counts["role_candidates"], 1)
        self.assertEqual(self.pg.sql(self.database, "SELECT payload_json FROM messages "
                                     "WHERE id = 'msg-1'"), '{"x":"line\nbreak"}')

    def test_a_target_with_hub_data_is_refused_untouched(self):
        path = self.triflux_file()
        code, _, err = self.copy(path)
        self.assertEqual(code, 0, err)
        counts = self.pg_counts()
        code, _, err = self.copy(path)
        self.assertEqual(code, 9, err)
        error = json.loads(err)
        self.assertEqual(error["reason"], "TARGET_NOT_EMPTY")
        self.assertEqual(error["metadata"]["table"], "agents")
        self.assertEqual(self.pg_counts(), counts)

    def test_verify_names_the_first_row_changed_in_postgres(self):
        path = self.triflux_file()
        code, _, err = self.copy(path)
        self.assertEqual(code, 0, err)
        self.pg.sql(self.database,
                    "UPDATE messages SET payload_json = '{}' WHERE id = 'msg-1'")
        code, _, err = self.ctl("db", "verify", "--from=" + path, "--to=" + self.url)
        self.assertEqual(code, 15, err)  # DATA_LOSS
        self.assertIn("COPY_VERIFY_MISMATCH", err)
        self.assertIn("table messages row id=msg-1: column payload_json", err)
        self.pg.sql(self.database, "DELETE FROM role_candidates")
        code, _, err = self.ctl("--json", "db", "verify", "--from=" + path,
                                "--to=" + self.url)
        self.assertEqual(code, 15, err)
        self.assertEqual(json.loads(err)["metadata"]["table"], "messages")

    def test_every_failure_exits_with_its_code_and_reason(self):
        path = self.triflux_file()

        def fails(code, reason, *args):
            got, _, err = self.ctl("--json", "db", "copy", *args)
            self.assertEqual(got, code, err)
            self.assertEqual(json.loads(err)["reason"], reason, err)

        fails(3, "STORE_URL_INVALID", "--from=" + path, "--to=postgres://[::1")
        fails(14, "STORE_UNAVAILABLE", "--from=" + path,
              "--to=postgresql://hub@/x?host=/nonexistent-dir")
        fails(5, "STORE_NOT_FOUND", "--from=" + path + ".missing", "--to=" + self.url)
        junk = os.path.join(self.dir, "junk.db")
        with open(junk, "w") as f:
            f.write("this is no database")
        fails(9, "STORE_NOT_SQLITE", "--from=" + junk, "--to=" + self.url)
        newer = os.path.join(self.dir, "newer.db")
        shutil.copyfile(path, newer)
        db = sqlite3.connect(newer)
        db.execute("UPDATE _meta SET value = '99' WHERE key = 'schema_version'")
        db.commit()
        db.close()
        fails(9, "SCHEMA_TOO_NEW", "--from=" + newer, "--to=" + self.url)
        # A file whose second page (a b-tree's header) is overwritten.
        corrupt = os.path.join(self.dir, "corrupt.db")
        shutil.copyfile(path, corrupt)
        with open(corrupt, "r+b") as f:
            f.seek(4096)
            f.write(b"\xff" * 64)
        got, _, err = self.ctl("--json", "db", "copy", "--from=" + corrupt, "--to=" + self.url)
        self.assertEqual(got, 9, err)
        self.assertEqual(json.loads(err)["reason"], "STORE_CORRUPT", err)
        # Usage errors.
        got, _, err = self.ctl("db", "copy", "--to=" + self.url)
        self.assertEqual(got, 64, err)
        got, _, err = self.ctl("db", "copy", "--from=" + path, "--to=" + self.url,
                               "--method=carrier-pigeon")
        self.assertEqual(got, 64, err)
        # None of that wrote a row.
        self.assertEqual(self.pg.sql(self.database, "SELECT count(*) FROM "
                                     "information_schema.tables WHERE table_name = 'agents' "
                                     "AND table_schema = 'public'"), "0")


if __name__ == "__main__":
    hubtest.run_tests()

#!/usr/bin/python3
"""hubctl jobs against the real hubd: a job created by hubctl, claimed,
heartbeated and completed; a stale attempt's write refused with its reason
(ASSIGN_ATTEMPT_MISMATCH, ASSIGN_WORKER_MISMATCH) and exit status 9 while
the current attempt goes on; list filters and paging; cancel and retry;
dependencies, idempotency keys and pools; and bad input refused, by the hub
(JOB_FIELD_INVALID, exit 3) or by hubctl's command line (exit 64).

Each test has its own worker and supervisor agents, so a claim of "the next
job" never takes another test's job."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hubtest  # noqa: E402

PROJECT = "prj_AAAAAAAAAAAAAAAAAAAAAA"
INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, USAGE = 3, 5, 9, 64
COMMANDS = ["jobs create", "jobs claim", "jobs heartbeat", "jobs complete",
            "jobs fail", "jobs get", "jobs list", "jobs cancel", "jobs retry"]


def fields(text):
    """The "key: value" lines hubctl prints for one job, as a dict."""
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


class HubctlJobsTest(hubtest.HubctlCalls, unittest.TestCase):
    PROJECT = PROJECT

    @classmethod
    def setUpClass(cls):
        cls.hubd = hubtest.Hubd(os.path.join(hubtest.tmpdir(), "jobs.sqlite"))
        cls.api = hubtest.Api(cls.hubd.address)

    @classmethod
    def tearDownClass(cls):
        cls.api.close()
        cls.hubd.stop()

    def setUp(self):
        name = self._testMethodName.replace("_", "-")[5:45]
        self.worker, self.boss = "w-" + name, "s-" + name
        self.generation = {}
        for agent, capabilities in ((self.worker, ["build", "linux"]), (self.boss, [])):
            # A long TTL: the agents stay online without heartbeats.
            answer = self.api.call(hubtest.REGISTER, {
                "agentId": agent, "cli": "AGENT_CLI_CLAUDE", "projectId": PROJECT,
                "capabilities": capabilities, "heartbeatTtl": "3600s"})
            self.generation[agent] = answer["presenceGeneration"]

    def refused(self, code, reason, *args, agent=None):
        """Runs hubctl --json ARGS, which must exit `code` naming `reason`;
        returns the error object it printed on stderr."""
        got, out, err = self.ctl("--json", *args, agent=agent)
        self.assertEqual(got, code, "hubctl %s: %s%s" % (" ".join(args), out, err))
        self.assertEqual(out, "")
        error = json.loads(err)
        self.assertEqual((error["exitCode"], error["reason"]), (code, reason), err)
        return error

    def create(self, task, *flags, worker=True):
        """Creates a job of self.boss (for self.worker unless `worker` is
        false) with hubctl --json; returns the job."""
        target = ("--worker=" + self.worker,) if worker else ()
        out = self.ok("--json", "jobs", "create", task, *target, *flags, agent=self.boss)
        answer = json.loads(out)
        self.assertTrue(answer["created"], out)
        return answer["job"]

    def claim(self, *args):
        """Claims as self.worker (text output); returns the printed fields."""
        return fields(self.ok("jobs", "claim", *args, agent=self.worker))

    def attempt_flags(self, job_id, attempt):
        return ["--job=" + job_id, "--attempt=%s" % attempt,
                "--generation=" + self.generation[self.worker]]

    def get(self, job_id):
        return json.loads(self.ok("--json", "jobs", "get", job_id))["job"]

    def test_every_subcommand_has_its_own_help(self):
        self.assert_each_has_its_own_help(COMMANDS)
        self.assertIn("hubctl jobs SUBCOMMAND", self.ok("jobs", "--help"))

    def test_a_job_is_created_claimed_heartbeated_and_completed(self):
        job = self.create("run the unit tests", "--payload={\"target\": \"//...\"}",
                          "--priority=7", "--max-attempts=3", "--attempt-timeout=300s",
                          "--trace=trace-1", "--correlation=corr-1")
        self.assertEqual(job["state"], "JOB_STATE_QUEUED")
        self.assertEqual(job["supervisor"], {"agentId": self.boss})
        self.assertEqual(job["worker"], {"agentId": self.worker})
        self.assertEqual((job["priority"], job["maxAttempts"], job["timeout"]),
                         (7, 3, "300s"))
        self.assertEqual(job["payload"], {"target": "//..."})
        self.assertEqual((job["traceId"], job["correlationId"]), ("trace-1", "corr-1"))
        shown = fields(self.ok("jobs", "get", job["jobId"]))
        self.assertEqual((shown["state"], shown["worker"], shown["supervisor"]),
                         ("queued", self.worker, self.boss))
        self.assertEqual(shown["payload"], '{"target":"//..."}')

        claimed = self.claim()  # the next job for this worker: this one
        self.assertEqual(claimed["job_id"], job["jobId"])
        self.assertEqual(claimed["state"], "running")
        self.assertEqual(claimed["attempt"], "1 of 3")
        self.assertEqual(claimed["attempt_agent"], self.worker)
        self.assertEqual(claimed["generation"], self.generation[self.worker])
        self.assertNotEqual(claimed["deadline"], "-")
        self.assertEqual(self.ok("jobs", "claim", agent=self.worker), "no claimable job\n")
        self.assertEqual(self.ok("--json", "jobs", "claim", agent=self.worker), "{}\n")

        attempt = self.attempt_flags(job["jobId"], 1)
        beat = fields(self.ok("jobs", "heartbeat", *attempt,
                              "--progress={\"passed\": 120}", agent=self.worker))
        self.assertEqual(beat["cancel_requested"], "false")
        self.assertNotEqual(beat["deadline"], "-")
        self.assertEqual(self.get(job["jobId"])["progress"], {"passed": 120})

        done = fields(self.ok("jobs", "complete", *attempt, "--result={\"passed\": 300}",
                              agent=self.worker))
        self.assertEqual((done["state"], done["result"]),
                         ("succeeded", '{"passed":300}'))
        # The same completion again answers the same job.
        again = json.loads(self.ok("--json", "jobs", "complete", *attempt,
                                   "--result={\"passed\": 300}", agent=self.worker))
        self.assertEqual(again["job"]["state"], "JOB_STATE_SUCCEEDED")
        # Any other write of the ended job is refused.
        self.refused(FAILED_PRECONDITION, "JOB_NOT_RUNNING", "jobs", "heartbeat",
                     *attempt, agent=self.worker)

    def test_a_stale_attempt_is_refused_and_the_current_one_goes_on(self):
        job = self.create("flaky build", "--max-attempts=2", "--initial-backoff=0s")
        first = self.claim(job["jobId"])
        self.assertEqual(first["attempt"], "1 of 2")
        failed = fields(self.ok("jobs", "fail", *self.attempt_flags(job["jobId"], 1),
                                "--reason=network", "--message=registry down",
                                agent=self.worker))
        self.assertEqual((failed["state"], failed["attempt"], failed["error"]),
                         ("queued", "2 of 2", "network: registry down"))
        second = self.claim(job["jobId"])
        self.assertEqual((second["state"], second["attempt"]), ("running", "2 of 2"))

        # Attempt 1's worker comes back with its result: refused, exit 9, and
        # in text the reason is on stderr.
        stale = self.attempt_flags(job["jobId"], 1)
        code, out, err = self.ctl("jobs", "complete", *stale, "--result={\"late\": true}",
                                  agent=self.worker)
        self.assertEqual((code, out), (FAILED_PRECONDITION, ""), err)
        self.assertIn("FAILED_PRECONDITION", err)
        self.assertIn("ASSIGN_ATTEMPT_MISMATCH", err)
        error = self.refused(FAILED_PRECONDITION, "ASSIGN_ATTEMPT_MISMATCH", "jobs",
                             "heartbeat", *stale, agent=self.worker)
        self.assertEqual(error["metadata"]["job_id"], job["jobId"])
        self.assertEqual(error["code"], "FAILED_PRECONDITION")
        # The right attempt from another agent or generation is not its worker's.
        current = self.attempt_flags(job["jobId"], 2)
        self.refused(FAILED_PRECONDITION, "ASSIGN_WORKER_MISMATCH", "jobs", "heartbeat",
                     *current, agent=self.boss)
        self.refused(FAILED_PRECONDITION, "ASSIGN_WORKER_MISMATCH", "jobs", "heartbeat",
                     *current[:2], "--generation=999", agent=self.worker)

        # None of that changed the job; the stale result is kept as a late one.
        now = self.get(job["jobId"])
        self.assertEqual(now["state"], "JOB_STATE_RUNNING")
        self.assertEqual(now["attempt"]["attempt"], "2")
        self.assertEqual([(r["attempt"], r["result"]) for r in now["lateResults"]],
                         [("1", {"late": True})])
        self.assertEqual(fields(self.ok("jobs", "get", job["jobId"]))["late_results"], "1")
        done = fields(self.ok("jobs", "complete", *current, agent=self.worker))
        self.assertEqual(done["state"], "succeeded")

    def test_list_filters_and_pages(self):
        trace = "trace-" + self.worker
        queued = self.create("queued one", "--trace=" + trace)
        running = self.create("running one", "--trace=" + trace, "--correlation=c-run")
        self.claim(running["jobId"])
        cancelled = self.create("cancelled one", "--trace=" + trace)
        self.ok("jobs", "cancel", cancelled["jobId"])
        other = self.create("another trace", "--trace=other-" + self.worker)

        def listed(*flags):
            out = self.ok("--json", "jobs", "list", "--trace=" + trace, *flags)
            return [j["jobId"] for j in json.loads(out).get("jobs", [])]

        # Newest change first.
        self.assertEqual(listed(), [cancelled["jobId"], running["jobId"], queued["jobId"]])
        self.assertEqual(listed("--state=queued"), [queued["jobId"]])
        self.assertEqual(listed("--state=running,cancelled"),
                         [cancelled["jobId"], running["jobId"]])
        self.assertEqual(listed("--state=queued", "--state=running"),
                         [running["jobId"], queued["jobId"]])
        self.assertEqual(listed("--correlation=c-run"), [running["jobId"]])
        self.assertEqual(listed("--supervisor=" + self.worker), [])
        self.assertEqual(
            [j["jobId"] for j in json.loads(self.ok(
                "--json", "jobs", "list", "--supervisor=" + self.boss,
                "--state=queued"))["jobs"]],
            [other["jobId"], queued["jobId"]])
        self.assertEqual(listed("--worker=" + self.worker,
                                "--deadline-before=2100-01-01T00:00:00Z"),
                         [running["jobId"]])

        # One page at a time, as the text says, or all with --all.
        out = self.ok("jobs", "list", "--trace=" + trace, "--page-size=2")
        lines = out.splitlines()
        self.assertEqual(lines[0].split()[:3], ["JOB_ID", "STATE", "PRIORITY"])
        self.assertEqual([line.split()[0] for line in lines[1:3]],
                         [cancelled["jobId"], running["jobId"]])
        self.assertIn("running", lines[2])
        self.assertTrue(lines[3].startswith("next page: --page-token="), out)
        token = lines[3].split("=", 1)[1]
        rest = self.ok("jobs", "list", "--trace=" + trace, "--page-size=2",
                       "--page-token=" + token).splitlines()
        self.assertEqual([line.split()[0] for line in rest[1:]], [queued["jobId"]])
        self.assertEqual(listed("--page-size=1", "--all"),
                         [cancelled["jobId"], running["jobId"], queued["jobId"]])
        every = self.ok("jobs", "list", "--trace=" + trace, "--page-size=1", "--all")
        self.assertEqual(len(every.splitlines()), 4, every)  # header, 3 jobs, no token
        self.refused(INVALID_ARGUMENT, "PAGE_TOKEN_INVALID", "jobs", "list",
                     "--page-token=garbage")

    def test_cancel_and_retry(self):
        queued = self.create("deploy", "--max-attempts=1")
        out = fields(self.ok("jobs", "cancel", queued["jobId"], "--reason=deploys are frozen"))
        self.assertEqual((out["state"], out["error"]),
                         ("cancelled", "cancelled: deploys are frozen"))
        self.refused(FAILED_PRECONDITION, "JOB_NOT_CLAIMABLE", "jobs", "claim",
                     queued["jobId"], agent=self.worker)
        retried = json.loads(self.ok("--json", "jobs", "retry", queued["jobId"]))["job"]
        self.assertEqual(retried["state"], "JOB_STATE_QUEUED")
        self.assertEqual(retried["attempt"]["attempt"], "2")
        self.assertEqual(retried["error"]["reason"], "cancelled")  # the last error, kept
        self.refused(FAILED_PRECONDITION, "JOB_NOT_ENDED", "jobs", "retry",
                     queued["jobId"])
        self.assertEqual(self.claim()["job_id"], queued["jobId"])

        # A running job is marked; its worker hears it from its next heartbeat,
        # and the attempt's end ends the job cancelled.
        running = self.create("long job", "--max-attempts=3")
        self.claim(running["jobId"])
        marked = fields(self.ok("jobs", "cancel", running["jobId"], "--reason=stop"))
        self.assertEqual((marked["state"], marked["cancel_requested"]), ("running", "true"))
        attempt = self.attempt_flags(running["jobId"], 1)
        beat = json.loads(self.ok("--json", "jobs", "heartbeat", *attempt, agent=self.worker))
        self.assertTrue(beat["cancelRequested"])
        ended = fields(self.ok("jobs", "fail", *attempt, "--reason=stopped",
                               agent=self.worker))
        self.assertEqual(ended["state"], "cancelled")
        self.refused(NOT_FOUND, "ASSIGN_NOT_FOUND", "jobs", "cancel", "no-such-job")

    def test_fail_without_retry_ends_the_job(self):
        job = self.create("needs a key", "--max-attempts=5",
                          "--non-retryable=no_credentials")
        self.claim(job["jobId"])
        out = fields(self.ok("jobs", "fail", *self.attempt_flags(job["jobId"], 1),
                             "--reason=disk_full", "--no-retry", agent=self.worker))
        self.assertEqual((out["state"], out["error"]), ("failed", "disk_full"))
        self.assertFalse(self.get(job["jobId"])["error"].get("retryable", False))
        # A reason the policy lists ends it too, even when retryable.
        listed = self.create("needs a key again", "--max-attempts=5",
                             "--non-retryable=no_credentials")
        self.claim(listed["jobId"])
        out = fields(self.ok("jobs", "fail", *self.attempt_flags(listed["jobId"], 1),
                             "--reason=no_credentials", agent=self.worker))
        self.assertEqual(out["state"], "failed")

    def test_dependencies_idempotency_and_pools(self):
        parent = self.create("build", "--idempotency-key=build-" + self.worker)
        again = json.loads(self.ok("--json", "jobs", "create", "build",
                                   "--worker=" + self.worker,
                                   "--idempotency-key=build-" + self.worker,
                                   agent=self.boss))
        self.assertEqual((again.get("created", False), again["job"]["jobId"]),
                         (False, parent["jobId"]))
        shown = fields(self.ok("jobs", "create", "build", "--worker=" + self.worker,
                               "--idempotency-key=build-" + self.worker, agent=self.boss))
        self.assertEqual((shown["created"], shown["job_id"]), ("false", parent["jobId"]))
        child = self.create("test", "--depends-on=" + parent["jobId"],
                            "--pool=build,linux", "--pool-topic=", worker=False)
        self.assertEqual(child["state"], "JOB_STATE_BLOCKED")
        self.assertEqual(child["dependsOn"], [parent["jobId"]])
        self.assertEqual(fields(self.ok("jobs", "get", child["jobId"]))["worker"],
                         "pool(build,linux)")
        self.refused(FAILED_PRECONDITION, "JOB_NOT_CLAIMABLE", "jobs", "claim",
                     child["jobId"], agent=self.worker)
        self.claim(parent["jobId"])
        self.ok("jobs", "complete", *self.attempt_flags(parent["jobId"], 1),
                agent=self.worker)
        self.assertEqual(self.get(child["jobId"])["state"], "JOB_STATE_QUEUED")
        # The pool's job goes to an agent with both capabilities; the
        # supervisor has none.
        self.refused(FAILED_PRECONDITION, "JOB_NOT_CLAIMABLE", "jobs", "claim",
                     child["jobId"], agent=self.boss)
        self.assertEqual(self.claim()["job_id"], child["jobId"])
        self.refused(NOT_FOUND, "JOB_DEPENDENCY_NOT_FOUND", "jobs", "create", "orphan",
                     "--worker=" + self.worker, "--depends-on=no-such-job",
                     agent=self.boss)

    def test_bad_input_is_refused(self):
        # Values are the hub's to judge: priority 10 is JOB_FIELD_INVALID.
        error = self.refused(INVALID_ARGUMENT, "JOB_FIELD_INVALID", "jobs", "create",
                             "too urgent", "--worker=" + self.worker, "--priority=10",
                             agent=self.boss)
        self.assertEqual(error["metadata"], {"field": "priority"})
        code, _, err = self.ctl("jobs", "create", "too urgent", "--worker=" + self.worker,
                                "--priority=10", agent=self.boss)
        self.assertEqual(code, INVALID_ARGUMENT, err)
        self.assertIn("JOB_FIELD_INVALID", err)
        self.assertIn("priority must be 1 .. 9", err)
        self.refused(INVALID_ARGUMENT, "JOB_FIELD_INVALID", "jobs", "create", "slow",
                     "--worker=" + self.worker, "--attempt-timeout=25h", agent=self.boss)
        self.refused(INVALID_ARGUMENT, "PROJECT_ID_INVALID", "jobs", "create", "x",
                     "--worker=" + self.worker, "--project=nope", agent=self.boss)
        self.refused(NOT_FOUND, "ASSIGN_NOT_FOUND", "jobs", "get", "no-such-job")
        self.refused(INVALID_ARGUMENT, "JOB_FIELD_INVALID", "jobs", "fail",
                     "--job=j", "--attempt=1", "--generation=1", "--reason=",
                     agent=self.worker)
        # Nothing was made.
        self.assertEqual(self.ok("--json", "jobs", "list", "--supervisor=" + self.boss),
                         "{}\n")

        # A command line hubctl cannot turn into a request: exit 64, no call.
        for args in (["jobs", "create", "x"],  # no worker
                     ["jobs", "create", "x", "--worker=a", "--pool=build"],
                     ["jobs", "create", "x", "--worker=a", "--payload=[1]"],
                     ["jobs", "create", "x", "--worker=a", "--priority=high"],
                     ["jobs", "create", "x", "--worker=a", "--not-before=tomorrow"],
                     ["jobs", "create", "x", "--worker=a", "--on-dependency-failure=maybe"],
                     ["jobs", "create"],
                     ["jobs", "heartbeat", "--job=j", "--attempt=1"],  # no --generation
                     ["jobs", "fail", "--job=j", "--attempt=1", "--generation=1"],
                     ["jobs", "list", "--state=done"],
                     ["jobs", "get"]):
            code, out, err = self.ctl(*args, agent=self.boss)
            self.assertEqual(code, USAGE, "%s: %s%s" % (args, out, err))
            self.assertIn("Run 'hubctl jobs", err)


if __name__ == "__main__":
    hubtest.run_tests()

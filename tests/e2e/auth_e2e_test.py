#!/usr/bin/python3
"""Identity and authority on the real hubd: hubctl over TLS + mutual TLS with
a bearer token (--token_file or $HUB_TOKEN), token reload on SIGHUP and on a
file change, certificate rotation on SIGHUP, the startup line's security summary, and the refusal to serve a
non-loopback address without TLS and tokens."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hubtest  # noqa: E402

PROJECT = "prj_AAAAAAAAAAAAAAAAAAAAAA"
OPS = "e2e-operator-token-00001"
ADMIN = "e2e-admin-token-00000002"
ROTATED = "e2e-rotated-token-000003"
UNAUTHENTICATED = 16


def hubctl_path():
    return os.path.abspath(os.environ["HUBCTL"])


class AuthE2eTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = hubtest.tmpdir()
        cls.pki = hubtest.make_test_pki(os.path.join(cls.dir, "pki"))

    def start(self, name, *extra):
        hubd = hubtest.Hubd(os.path.join(self.dir, name + ".sqlite"), *extra)
        self.addCleanup(hubd.stop)
        return hubd

    def tokens(self, name, entries):
        return hubtest.write_tokens(os.path.join(self.dir, name), entries)

    def ctl(self, hubd, *args, token=None, tls=True, ca="ca", client="client"):
        env = dict(os.environ)
        env["HUB_ADDR"] = hubd.address
        env.pop("HUB_TOKEN", None)
        if token is not None:
            env["HUB_TOKEN"] = token
        flags = []
        if tls:
            flags = ["--tls_ca=" + os.path.join(self.pki, ca + ".pem"),
                     "--tls_cert=" + os.path.join(self.pki, client + ".pem"),
                     "--tls_key=" + os.path.join(self.pki, client + ".key"),
                     "--tls_server_name=localhost"]
        r = subprocess.run([hubctl_path(), *flags, "--json", *args], capture_output=True,
                           text=True, timeout=60, env=env)
        return r.returncode, r.stdout, r.stderr

    def wait_for_log(self, hubd, text, count, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if hubd.stderr().count(text) >= count:
                return
            time.sleep(0.05)
        self.fail("hubd never logged %r %d times: %s" % (text, count, hubd.stderr()))

    def test_hubctl_connects_with_mutual_tls_and_a_token(self):
        tokens = self.tokens("tls.json", [(OPS, "ops", "operator", ["*"])])
        token_file = os.path.join(self.dir, "ops.token")
        with open(token_file, "w") as f:
            f.write(OPS + "\n")
        hubd = self.start(
            "tls", "--tls_cert=" + os.path.join(self.pki, "server.pem"),
            "--tls_key=" + os.path.join(self.pki, "server.key"),
            "--tls_client_ca=" + os.path.join(self.pki, "ca.pem"), "--token_file=" + tokens)
        with open(hubd.log_path) as f:
            self.assertIn("tls=on mtls=on auth=tokens", f.read())
        code, out, err = self.ctl(hubd, "--token_file=" + token_file, "status")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["hubInstanceId"], hubd.instance_id)
        code, out, err = self.ctl(hubd, "roles", "reserve", "--project=" + PROJECT, "--kind=cto",
                                  token=OPS)
        self.assertEqual(code, 0, err)
        code, _, err = self.ctl(hubd, "status")
        self.assertEqual(code, UNAUTHENTICATED, err)
        self.assertEqual(json.loads(err)["reason"], "PRINCIPAL_REQUIRED")
        code, _, err = self.ctl(hubd, "status", token="not-the-token-00000")
        self.assertEqual(json.loads(err)["reason"], "UNAUTHENTICATED")
        # Plaintext against the TLS port fails at the transport (UNAVAILABLE).
        code, _, err = self.ctl(hubd, "status", token=OPS, tls=False)
        self.assertEqual(code, 14, err)
        self.assertNotIn(OPS, hubd.stderr())
        self.assertNotIn("not-the-token", hubd.stderr())

    def test_sighup_and_a_file_change_reload_the_tokens(self):
        path = self.tokens("reload.json", [(OPS, "ops", "operator", ["*"])])
        hubd = self.start("reload", "--token_file=" + path)
        with open(hubd.log_path) as f:
            self.assertIn("tls=off mtls=off auth=tokens", f.read())
        self.assertEqual(self.ctl(hubd, "status", token=OPS, tls=False)[0], 0)
        # Same length, same inode, same mtime: only SIGHUP can notice it.
        before = os.stat(path)
        with open(path) as f:
            text = f.read()
        with open(path, "r+") as f:
            f.write(text.replace(OPS, ROTATED))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        time.sleep(1.5)  # the file watcher polls every second: it must not react
        self.assertEqual(self.ctl(hubd, "status", token=OPS, tls=False)[0], 0)
        hubd.proc.send_signal(signal.SIGHUP)
        self.wait_for_log(hubd, "reloaded", 1)
        code, _, err = self.ctl(hubd, "status", token=OPS, tls=False)
        self.assertEqual(code, UNAUTHENTICATED, err)
        self.assertEqual(self.ctl(hubd, "status", token=ROTATED, tls=False)[0], 0)
        # A plain rewrite is picked up by the watcher, without a signal.
        self.tokens("reload.json", [(ROTATED, "ops", "operator", ["*"]),
                                    (ADMIN, "root", "admin", ["*"])])
        self.wait_for_log(hubd, "reloaded", 2)
        self.assertEqual(self.ctl(hubd, "status", token=ADMIN, tls=False)[0], 0)
        self.assertIsNone(hubd.proc.poll())
        for token in (OPS, ROTATED, ADMIN):
            self.assertNotIn(token, hubd.stderr())

    def test_sighup_reloads_the_tls_certificates_for_new_connections(self):
        rotate = os.path.join(self.dir, "rotate")
        os.makedirs(rotate, exist_ok=True)
        files = {"server.pem": "server.pem", "server.key": "server.key", "client_ca.pem": "ca.pem"}
        for name, source in files.items():
            shutil.copyfile(os.path.join(self.pki, source), os.path.join(rotate, name))
        tokens = self.tokens("rotate.json", [(OPS, "ops", "operator", ["*"])])
        hubd = self.start(
            "rotate", "--tls_cert=" + os.path.join(rotate, "server.pem"),
            "--tls_key=" + os.path.join(rotate, "server.key"),
            "--tls_client_ca=" + os.path.join(rotate, "client_ca.pem"), "--token_file=" + tokens)
        old = dict(token=OPS)
        new = dict(token=OPS, ca="other_ca", client="other_client")
        self.assertEqual(self.ctl(hubd, "status", **old)[0], 0)
        self.assertEqual(self.ctl(hubd, "status", **new)[0], 14)

        # Rotate all three in place: a server certificate and client CA of
        # another authority. Nothing changes before the signal.
        for name, source in {"server.pem": "other_server.pem", "server.key": "other_server.key",
                             "client_ca.pem": "other_ca.pem"}.items():
            shutil.copyfile(os.path.join(self.pki, source), os.path.join(rotate, name))
        time.sleep(1.5)
        self.assertEqual(self.ctl(hubd, "status", **old)[0], 0)
        hubd.proc.send_signal(signal.SIGHUP)
        self.wait_for_log(hubd, "TLS certificates reloaded", 1)
        deadline = time.monotonic() + 10
        while self.ctl(hubd, "status", **new)[0] != 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        code, _, err = self.ctl(hubd, "status", **new)
        self.assertEqual(code, 0, err)
        self.assertEqual(self.ctl(hubd, "status", **old)[0], 14)

        # A key that is not the certificate's is refused; the current set stays.
        shutil.copyfile(os.path.join(self.pki, "client.key"), os.path.join(rotate, "server.key"))
        hubd.proc.send_signal(signal.SIGHUP)
        self.wait_for_log(hubd, "TLS certificate reload failed", 1)
        self.assertIn("is not the key of", hubd.stderr())
        time.sleep(1.5)
        self.assertEqual(self.ctl(hubd, "status", **new)[0], 0)
        self.assertIsNone(hubd.proc.poll())

    def test_without_tls_and_tokens_hubd_stays_on_loopback_and_says_so(self):
        hubd = self.start("plain")
        with open(hubd.log_path) as f:
            self.assertIn("loopback only: every caller is an anonymous admin", f.read())
        self.assertEqual(self.ctl(hubd, "status", tls=False)[0], 0)

    def test_a_non_loopback_address_without_tls_and_tokens_is_refused(self):
        db = os.path.join(self.dir, "exposed.sqlite")
        r = subprocess.run([hubtest.hubd_path(), "--listen=0.0.0.0:0", "--db=" + db],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("refusing to listen on non-loopback address 0.0.0.0:0", r.stderr)
        self.assertIn("--insecure", r.stderr)
        self.assertNotIn("serving on", r.stdout)
        tokens = self.tokens("exposed.json", [(OPS, "ops", "operator", ["*"])])
        r = subprocess.run([hubtest.hubd_path(), "--listen=0.0.0.0:0", "--db=" + db,
                            "--token_file=" + tokens], capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn("without TLS", r.stderr)
        hubd = self.start("insecure", "--listen=0.0.0.0:0", "--insecure")
        with open(hubd.log_path) as f:
            self.assertIn("INSECURE", f.read())


if __name__ == "__main__":
    hubtest.run_tests()

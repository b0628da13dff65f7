"""`tokenmill serve` as a child process, for the Python tests and benchmarks of the server.

    with serve(binary, model, "--max-running", "8", api_key="k") as server:
        ... server.url ("http://127.0.0.1:PORT"), server.pid, server.model_id ...

serve() starts the server on a free port (--port 0; the port is read from the startup log),
waits until GET /ready answers 200, and yields a Server. On exit it sends SIGTERM and checks
that the process exits with status 0 within the shutdown grace and that its log (stdout and
stderr) never contains the API key; a failed check raises ServerError (unless the body of
the `with` is already raising, whose exception then goes on, the failure being printed).
"""

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

_LISTENING = re.compile(r"serving \S+ on (http://[^\s:]+:\d+)")


class ServerError(Exception):
    pass


class Server:
    def __init__(self, process, log_paths):
        self.process = process
        self.pid = process.pid
        self.url = None
        self.model_id = None  # from GET /ready
        self._log_paths = log_paths

    def host_port(self):
        """(host, port) of the server's address."""
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        return host, int(port)

    def log(self):
        """Everything the server has written so far, stdout then stderr."""
        parts = []
        for path in self._log_paths:
            with open(path, encoding="utf-8", errors="replace") as f:
                parts.append(f.read())
        return "".join(parts)

    def get(self, path, timeout=10):
        """(status, body bytes) of GET url + path."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def get_json(self, path, timeout=10):
        status, body = self.get(path, timeout)
        if status != 200:
            raise ServerError(f"GET {path}: HTTP {status}: {body[:300]!r}")
        return json.loads(body)

    def metrics(self):
        """GET /metrics as {"name" or "name{labels}": value}."""
        status, body = self.get("/metrics")
        if status != 200:
            raise ServerError(f"GET /metrics: HTTP {status}")
        values = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                values[name] = float(value)
        return values

    def _status_bytes(self, field):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
        raise ServerError(f"no {field} in /proc/PID/status")

    def rss_bytes(self):
        """The server process's resident memory (VmRSS)."""
        return self._status_bytes("VmRSS")

    def peak_rss_bytes(self):
        """The server process's peak resident memory (VmHWM) since start or reset_peak_rss()."""
        return self._status_bytes("VmHWM")

    def reset_peak_rss(self):
        """Resets the peak (VmHWM) to the current resident memory (Linux clear_refs 5)."""
        with open(f"/proc/{self.pid}/clear_refs", "w") as f:
            f.write("5")

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while self.url is None:
            found = _LISTENING.search(self.log())
            if found:
                self.url = found.group(1)
                break
            self._check_alive("starting")
            if time.monotonic() > deadline:
                raise ServerError(f"no 'serving ... on http://...' line within {timeout} s:\n{self.log()}")
            time.sleep(0.05)
        while True:
            try:
                status, body = self.get("/ready", timeout=2)
                if status == 200:
                    self.model_id = json.loads(body)["model"]
                    return
            except OSError:
                pass
            self._check_alive("waiting for /ready")
            if time.monotonic() > deadline:
                raise ServerError(f"GET /ready did not answer 200 within {timeout} s:\n{self.log()}")
            time.sleep(0.05)

    def _check_alive(self, doing):
        if self.process.poll() is not None:
            raise ServerError(f"the server exited with status {self.process.returncode} while {doing}:\n{self.log()}")


def _stop(server, api_key, grace):
    """SIGTERM, then the exit-status and key-leak checks: a list of failures."""
    failures = []
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
        try:
            server.process.wait(timeout=grace + 15)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
            failures.append(f"the server did not exit within {grace + 15} s of SIGTERM (killed)")
    if server.process.returncode != 0 and not failures:
        failures.append(f"the server exited with status {server.process.returncode} after SIGTERM")
    if api_key and api_key in server.log():
        failures.append("the API key appears in the server's log")
    return failures


def main(script):
    """The entry of a server test script: `script TOKENMILL_BINARY FIXTURES_DIR [unittest args]`."""
    import unittest
    if len(sys.argv) < 3:
        sys.exit(f"usage: {script} TOKENMILL_BINARY FIXTURES_DIR [unittest args]")
    unittest.main(module="__main__", argv=[sys.argv[0]] + sys.argv[3:])


def assert_bad_requests(test, call, cases, error):
    """Each (kwargs, param) of `cases`: call(**kwargs) raises `error` (the openai client's
    BadRequestError) naming `param`."""
    for kwargs, param in cases:
        with test.subTest(param=param), test.assertRaises(error) as raised:
            call(**kwargs)
        test.assertEqual(raised.exception.param, param)


@contextlib.contextmanager
def serve(binary, model, *args, threads=None, api_key=None, grace=5, startup_timeout=120, quiet=True):
    """Runs `binary [-t threads] serve -m model --port 0 [--api-key api_key] --shutdown-grace grace
    args...` and yields a Server once it is ready. quiet=False echoes the log to stderr at exit."""
    command = [str(binary)]
    if threads is not None:
        command += ["-t", str(threads)]
    command += ["serve", "-m", str(model), "--port", "0", "--shutdown-grace", str(grace)]
    if api_key:
        command += ["--api-key", api_key]
    command += [str(a) for a in args]
    with tempfile.TemporaryDirectory(prefix="tokenmill-serve-") as tmp:
        out_path, err_path = os.path.join(tmp, "stdout.log"), os.path.join(tmp, "stderr.log")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        server = Server(process, [out_path, err_path])
        failed = False
        try:
            server._wait_ready(startup_timeout)
            yield server
        except BaseException:
            failed = True
            raise
        finally:
            failures = _stop(server, api_key, grace)
            if not quiet:
                sys.stderr.write(server.log())
            if failures and failed:
                print("server_process: also " + "; ".join(failures), file=sys.stderr)
            elif failures:
                raise ServerError("; ".join(failures) + "\n--- server log ---\n" + server.log()[-4000:])

"""Real servers on 127.0.0.1 for the tests: an S3-compatible server (moto's server mode) and a
Range-capable HTTP server with scripted faults. Each runs in its own process: GDAL holds the
GIL while it reads, so a server thread of the test process would never answer.

- :func:`s3_server`: ``python -m moto.server`` on a free port; yields its endpoint URL with the
  environment set for GDAL (``AWS_S3_ENDPOINT``, ``AWS_HTTPS=NO``, ``AWS_VIRTUAL_HOSTING=FALSE``)
  and for botocore/s3fs (``AWS_ENDPOINT_URL``), and test credentials.
- :func:`http_server`: serves a folder (HEAD, GET with ``Range``), logs every request as a
  JSON line ``[method, path, range, status, bytes]`` and answers by the rules in
  ``<folder>/.faults.json`` (re-read at each request, so a test changes them while it runs):
  ``{"/x.tif": {"status": 403}}`` (always), ``{"/x.tif": {"status": 503, "times": 2}}`` (the
  first two requests, then normal), ``{"/x.tif": {"drop_after": 1000, "times": 1}}`` (the
  first GET gets its headers and 1000 bytes, then the connection is closed); ``"after": n``
  lets the first ``n`` matching requests through before the rule applies.

Examples
--------
>>> free_port() > 1024
True
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

__all__ = ["free_port", "environ", "s3_server", "s3_env", "iam_user",
           "new_bucket", "s3_client", "http_server", "requests_of", "set_faults"]

#: Credentials of the test server (moto accepts any); never real ones.
TEST_KEY_ID = "testing-key-id"
TEST_SECRET = "testing-secret-value"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"the server for {url} exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the server for {url} did not answer in {timeout} s")


def s3_env(endpoint: str) -> dict[str, str]:
    """The environment that points GDAL and botocore/s3fs at the S3 server ``endpoint``."""
    host = re.sub(r"^https?://", "", endpoint)
    return {
        "AWS_ENDPOINT_URL": endpoint,  # botocore, s3fs
        "AWS_S3_ENDPOINT": host,  # GDAL /vsis3/
        "AWS_HTTPS": "NO",
        "AWS_VIRTUAL_HOSTING": "FALSE",
        "AWS_ACCESS_KEY_ID": TEST_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": TEST_SECRET,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_CONFIG_FILE": os.devnull,  # never the developer's own profiles
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",
    }


@contextlib.contextmanager
def environ(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` updated with ``values`` for the block, then as it was."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def s3_server(*, auth_after: int | None = None, secret: str = TEST_SECRET) -> Iterator[str]:
    """Start moto's S3 server on 127.0.0.1 and set :func:`s3_env` in ``os.environ`` for the block;
    yields the endpoint URL (``http://127.0.0.1:PORT``).

    ``auth_after=N``: the server authenticates and authorises every request after the first N
    AWS actions (moto's ``INITIAL_NO_AUTH_ACTION_COUNT``): keys must then be an IAM user's
    (:func:`iam_user` makes one in 3 actions), anything else is answered 403. Default: never
    (any key is accepted).

    ``secret``: the ``AWS_SECRET_ACCESS_KEY`` set for the block (a test plants a recognisable one
    to check that it appears nowhere); s3fs's cached file systems are dropped on entry and exit,
    so that none keeps the other credentials."""
    import s3fs

    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    env = dict(os.environ)
    if auth_after is not None:
        env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(auth_after)
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        _wait_http(f"{endpoint}/moto-api/", proc)
        with environ({**s3_env(endpoint), "AWS_SECRET_ACCESS_KEY": secret}):
            s3fs.S3FileSystem.clear_instance_cache()
            try:
                yield endpoint
            finally:
                s3fs.S3FileSystem.clear_instance_cache()
    finally:
        proc.terminate()
        proc.wait(10)


def s3_client(**keys: str):  # noqa: ANN201 - boto3's client type is generated at run time
    """A boto3 S3 client of the server set in the environment (to arrange and inspect buckets);
    ``keys``: ``aws_access_key_id=``, ``aws_secret_access_key=`` other than the environment's."""
    import boto3

    return boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1", **keys)


def iam_user(name: str = "xdem-reader") -> tuple[str, str]:
    """An IAM user allowed every S3 action on the server in the environment, in 3 actions
    (create the user, attach the policy, create a key); returns its ``(key id, secret)``."""
    import boto3

    iam = boto3.client("iam", endpoint_url=os.environ["AWS_ENDPOINT_URL"], region_name="us-east-1")
    iam.create_user(UserName=name)
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_user_policy(UserName=name, PolicyName="s3-all", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=name)["AccessKey"]
    return key["AccessKeyId"], key["SecretAccessKey"]


def new_bucket(prefix: str = "xdem-test") -> str:
    """Create a bucket with a unique name on the server in the environment; returns its name."""
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    s3_client().create_bucket(Bucket=name)
    return name


def set_faults(folder: Path, faults: dict[str, dict[str, int]]) -> None:
    """The fault rules of the HTTP server serving ``folder`` (see the module docstring)."""
    tmp = folder / ".faults.json.tmp"
    tmp.write_text(json.dumps(faults))
    os.replace(tmp, folder / ".faults.json")
    (folder / ".faults.count.json").unlink(missing_ok=True)


def requests_of(log: Path) -> list[list]:
    """The requests the HTTP server logged: ``[method, path, range, status, bytes]`` each."""
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@contextlib.contextmanager
def http_server(folder: Path, log: Path) -> Iterator[str]:
    """Serve ``folder`` on 127.0.0.1 from another process, logging to ``log``; yields the base URL."""
    proc = subprocess.Popen([sys.executable, __file__, str(folder), str(log)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


class RangeHandler(SimpleHTTPRequestHandler):
    """HEAD and GET of a folder's files, with ``Range: bytes=a-b`` (206) and scripted faults."""

    log: Path | None = None

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
        pass

    def _record(self, status: int, size: int) -> None:
        if RangeHandler.log is not None:
            with RangeHandler.log.open("a") as f:
                f.write(json.dumps([self.command, self.path.split("?")[0], self.headers.get("Range"), status, size]) + "\n")

    def _fault(self, path: str, *, body: bool) -> dict[str, int] | None:
        """The rule for this request, counted once it applies (a drop applies to GETs only)."""
        folder = Path(self.directory)
        try:
            rule = json.loads((folder / ".faults.json").read_text()).get(path)
        except (OSError, ValueError):
            return None
        if not rule or ("drop_after" in rule and not body):
            return None
        if "times" in rule or "after" in rule:
            counts_file = folder / ".faults.count.json"
            try:
                counts = json.loads(counts_file.read_text())
            except (OSError, ValueError):
                counts = {}
            seen = counts.get(path, 0)
            counts[path] = seen + 1
            counts_file.write_text(json.dumps(counts))
            first = rule.get("after", 0)
            if seen < first or seen >= first + rule.get("times", 1 << 30):
                return None
        return rule

    def _answer(self, body: bool) -> None:
        path = self.path.split("?")[0]
        rule = self._fault(path, body=body)
        if rule and "status" in rule:
            self._record(rule["status"], 0)
            self.send_error(rule["status"])
            return
        target = Path(self.directory) / path.lstrip("/")
        if not target.is_file() or target.name.startswith(".faults"):
            self._record(404, 0)
            self.send_error(404)
            return
        total = target.stat().st_size
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range") or "")
        start, end = 0, total - 1
        if wanted and body:
            start = int(wanted.group(1))
            end = min(int(wanted.group(2) or total - 1), total - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{total}")
            status = 206
        else:
            self.send_response(200)
            status = 200
        with target.open("rb") as f:  # only the range asked for (large files in the benchmark)
            f.seek(start)
            data = f.read(end + 1 - start) if body else b""
        self.send_header("Content-Length", str(end + 1 - start))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if not body:
            self._record(status, 0)
            return
        if rule and "drop_after" in rule:
            self.wfile.write(data[: rule["drop_after"]])
            self.wfile.flush()
            self._record(-1, rule["drop_after"])
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        self.wfile.write(data)
        self._record(status, len(data))

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(body=True)


if __name__ == "__main__":  # the HTTP server: python servers.py FOLDER LOG; prints its port
    RangeHandler.log = Path(sys.argv[2])
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: RangeHandler(*a, directory=sys.argv[1]))
    print(httpd.server_address[1], flush=True)
    httpd.serve_forever()

"""Tessera's platform from Python (a notebook, a script): submit jobs to a `tessera server`, follow
their cost live, read their logs, scale them, and get the trained model back.

    import tessera
    p = tessera.connect("http://127.0.0.1:8780", token)   # or the login `tessera login` saved
    def train():                                          # runs as every trainer of the job
        import tessera, torch
        ...
    job = p.submit(train, dataset="fm", trainers=2, passes=2)
    job.on("cost", lambda point: print(point["step"], point["cost"]))
    job.wait()
    job.load_into(model)                                  # the trained parameters

Only the standard library is used here (no native code), so this part works in any Python; the
model helpers (load_into, load_model) need the native module, as trainers do.
"""

import gzip as _gzip
import hashlib as _hashlib
import http.client as _http
import inspect as _inspect
import io as _io
import json as _json
import os as _os
import ssl as _ssl
import tarfile as _tarfile
import textwrap as _textwrap
import threading as _threading
import time as _time
import urllib.parse as _parse

__all__ = ["connect", "Platform", "Job", "PlatformError"]

_ENDED = ("succeeded", "failed", "stopped")


class PlatformError(Exception):
    """A refusal from the server (its code and message), or a server that cannot be reached."""

    def __init__(self, message, code="", status=0):
        super().__init__(message)
        self.code = code
        self.status = status


def _saved_login():
    d = _os.environ.get("TESSERA_CONFIG_DIR")
    if not d:
        base = _os.environ.get("XDG_CONFIG_HOME") or _os.path.join(_os.path.expanduser("~"), ".config")
        d = _os.path.join(base, "tessera")
    try:
        with open(_os.path.join(d, "login.json")) as f:
            return _json.load(f)
    except (OSError, ValueError):
        return {}


def connect(url=None, token=None, namespace=None, ca_cert=None, timeout=60.0):
    """A connection to a tessera server. Without arguments: TESSERA_SERVER and TESSERA_TOKEN, else
    the login `tessera login` saved. `namespace` defaults to the user's own."""
    saved = _saved_login()
    url = url or _os.environ.get("TESSERA_SERVER") or saved.get("server")
    token = token or _os.environ.get("TESSERA_TOKEN") or saved.get("token")
    if not url or not token:
        raise PlatformError("no server or token: give tessera.connect(url, token), or run `tessera login` first")
    return Platform(url, token, namespace, ca_cert or _os.environ.get("TESSERA_CA_CERT"), timeout)


class Platform:
    """A tessera server, as one user. Thread-safe: every call opens its own connection."""

    def __init__(self, url, token, namespace=None, ca_cert=None, timeout=60.0):
        if "://" not in url:
            url = "http://" + url
        u = _parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise PlatformError("server address %r is not of the form http://HOST:PORT" % url)
        self.url = "%s://%s" % (u.scheme, u.netloc)
        self._https = u.scheme == "https"
        self._host, self._port = u.hostname, u.port or (443 if self._https else 80)
        self._token = token
        self._timeout = timeout
        self._ssl = _ssl.create_default_context(cafile=ca_cert) if self._https else None
        self.user = self.call("GET", "/api/v1/me")["user"]["name"]
        self.namespace = namespace or self.user

    def _connection(self, timeout=None):
        t = self._timeout if timeout is None else timeout
        if self._https:
            return _http.HTTPSConnection(self._host, self._port, timeout=t, context=self._ssl)
        return _http.HTTPConnection(self._host, self._port, timeout=t)

    def _open(self, method, path, body=None, headers=None, timeout=None):
        h = {"Authorization": "Bearer " + self._token}
        h.update(headers or {})
        c = self._connection(timeout)
        try:
            c.request(method, path, body=body, headers=h)
            return c, c.getresponse()
        except OSError as e:
            c.close()
            raise PlatformError("cannot reach the tessera server at %s (%s)" % (self.url, e), "unavailable") from None

    def call(self, method, path, body=None, raw=None, headers=None):
        """One API call; the answer's JSON ({} for none). Raises PlatformError with the server's message."""
        data = raw
        h = dict(headers or {})
        if body is not None:
            data = _json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        elif raw is not None:
            h["Content-Type"] = "application/octet-stream"
        c, r = self._open(method, path, data, h)
        try:
            text = r.read()
        finally:
            c.close()
        if r.status >= 300:
            raise _error(r.status, text)
        return _json.loads(text) if text else {}

    def submit(self, code=None, *, dataset, command=None, model=None, files=None, name=None, eval_dataset=None,
               mode=None, optimizer=None, passes=None, batch_size=None, pservers=None, trainers=None,
               trainers_min=None, priority=None, cpu=None, memory_mb=None, gpus=None, model_args=None,
               python="/usr/bin/python3"):
        """Submits a job; returns its Job.

        code: a function (its source becomes train.py, called with no arguments: put its imports
        inside it), a path to a script or a directory, or None with model= (a built-in model).
        files: more {name: text or bytes} to put beside it. command: what each trainer runs in the
        package's directory (default: `python train.py` for a function or a script)."""
        if (code is None) == (model is None):
            raise PlatformError("give either code (a function, a script or a directory) or model=NAME")
        spec = {"dataset": dataset}
        if model is not None:
            spec["model"] = model
        else:
            package, entry = _package(code, files or {})
            digest = _hashlib.sha256(package).hexdigest()
            self.call("PUT", "/api/v1/namespaces/%s/packages/%s" % (self.namespace, digest), raw=package)
            spec["package"] = digest
            spec["command"] = command or "%s %s" % (python, entry)
        for k, v in (("name", name), ("eval_dataset", eval_dataset), ("mode", mode), ("optimizer", optimizer),
                     ("passes", passes), ("batch_size", batch_size), ("pservers", pservers), ("trainers", trainers),
                     ("trainers_min", trainers_min), ("priority", priority), ("model_args", model_args)):
            if v is not None:
                spec[k] = v
        resources = {k: v for k, v in (("cpu", cpu), ("memory_mb", memory_mb), ("gpus", gpus)) if v is not None}
        if resources:
            spec["resources"] = resources
        j = self.call("POST", "/api/v1/namespaces/%s/jobs" % self.namespace, spec)
        return Job(self, j["id"])

    def job(self, job_id):
        """An existing job by its id."""
        return Job(self, job_id)

    def jobs(self, state=None, limit=100):
        """The namespace's jobs, newest first, as dicts."""
        q = "?limit=%d" % limit + ("&state=" + state if state else "")
        return self.call("GET", "/api/v1/namespaces/%s/jobs%s" % (self.namespace, q))["jobs"]

    def datasets(self):
        return self.call("GET", "/api/v1/namespaces/%s/datasets" % self.namespace)["datasets"]

    def quota(self):
        return self.call("GET", "/api/v1/namespaces/%s/quota" % self.namespace)


class Job:
    """A job on the server. Its callbacks run on one background thread per job."""

    def __init__(self, platform, job_id):
        self.platform = platform
        self.id = job_id
        self.url = "%s/#/job/%s" % (platform.url, job_id)  # its page in a browser
        self._callbacks = {"cost": [], "eval": [], "state": []}
        self._watcher = None
        self._lock = _threading.Lock()

    def __repr__(self):
        return "<tessera job %s>" % self.id

    def info(self):
        """The job as the server describes it: state, reason, spec, workers, result, events."""
        return self.platform.call("GET", "/api/v1/jobs/" + self.id)

    @property
    def state(self):
        return self.info()["state"]

    def metrics(self, follow=False, since=0, poll=0.5, timeout=None):
        """Yields the job's cost and evaluation points (dicts with type "cost" or "eval", seq, pass,
        step, time_ms, and cost or metric and value) in order. With follow=True, keeps yielding as
        the job reports them, until it has ended and every point is read."""
        deadline = None if timeout is None else _time.monotonic() + timeout
        while True:
            ended = not follow or self.info()["ended_ms"] is not None
            while True:
                m = self.platform.call("GET", "/api/v1/jobs/%s/metrics?since=%d" % (self.id, since))
                for p in m["points"]:
                    yield p
                since = m["next"]
                if not m["more"]:
                    break
            if ended:
                return
            if deadline is not None and _time.monotonic() > deadline:
                raise TimeoutError("job %s did not end in %s s" % (self.id, timeout))
            _time.sleep(poll)

    def on(self, event, fn):
        """Calls fn(point) for each new "cost" or "eval" point, or fn(job_dict) when the "state"
        changes, from a background thread, from now until the job ends."""
        if event not in self._callbacks:
            raise ValueError("unknown event %r (expected cost, eval or state)" % event)
        with self._lock:
            self._callbacks[event].append(fn)
            if self._watcher is None:
                self._watcher = _threading.Thread(target=self._watch, name="tessera-job-" + self.id, daemon=True)
                self._watcher.start()
        return self

    def _watch(self):
        last_state = None
        since = 0
        while True:
            try:
                j = self.info()
                for p in self.metrics(since=since):
                    since = p["seq"]
                    for fn in list(self._callbacks.get(p.get("type"), [])):
                        fn(p)
                if j["state"] != last_state:
                    last_state = j["state"]
                    for fn in list(self._callbacks["state"]):
                        fn(j)
                if j["ended_ms"] is not None:
                    for p in self.metrics(since=since):  # the last points, written as it ended
                        since = p["seq"]
                        for fn in list(self._callbacks.get(p.get("type"), [])):
                            fn(p)
                    return
            except PlatformError:
                pass  # the server restarting: it keeps the job; try again
            _time.sleep(0.5)

    def wait(self, timeout=None, poll=1.0):
        """Waits until the job ends (and its callbacks have seen every point); returns its dict.
        Raises PlatformError if it did not succeed, TimeoutError if it runs past `timeout` s."""
        deadline = None if timeout is None else _time.monotonic() + timeout
        while True:
            j = self.info()
            if j["ended_ms"] is not None:
                break
            if deadline is not None and _time.monotonic() > deadline:
                raise TimeoutError("job %s is still %s after %s s" % (self.id, j["state"], timeout))
            _time.sleep(poll)
        if self._watcher is not None:
            self._watcher.join(timeout=30)
        if j["state"] != "succeeded":
            raise PlatformError("job %s %s: %s" % (self.id, j["state"], j.get("reason", "")), j["state"])
        return j

    def logs(self, node="trainer-0", follow=False, tail=None):
        """Yields the lines of one of the job's logs (trainer-N, pserver-N, master-0, supervisor):
        the last `tail` lines, or the whole log; with follow=True, then the new ones until the job
        has ended."""
        path = "/api/v1/jobs/%s/logs/%s" % (self.id, node)
        offset = 0
        if tail:
            t = self.platform.call("GET", "%s?tail=%d" % (path, tail))
            for line in t["text"].splitlines():
                yield line
            offset = t["next"]
        else:
            while True:
                t = self.platform.call("GET", "%s?offset=%d" % (path, offset))
                if not t["text"]:
                    break
                for line in t["text"].splitlines():
                    yield line
                offset = t["next"]
        if follow:
            yield from self._follow(path + "/follow?offset=%d" % offset)

    def _follow(self, path):
        c, r = self.platform._open("GET", path, headers={"Accept": "text/event-stream"}, timeout=60)
        try:
            if r.status >= 300:
                raise _error(r.status, r.read())
            event, data = "message", []
            while True:
                raw = r.readline()
                if not raw:
                    return
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line == "":
                    if event == "end":
                        return
                    if data:
                        yield "\n".join(data)
                    event, data = "message", []
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip(" ") if line[5:6] == " " else line[5:])
                elif line.startswith("event:"):
                    event = line[6:].strip()
        finally:
            c.close()

    def scale(self, trainers):
        """Changes the number of trainers: fewer at once, more when the server has room."""
        return self.platform.call("POST", "/api/v1/jobs/%s/scale" % self.id, {"trainers": int(trainers)})

    def stop(self):
        return self.platform.call("POST", "/api/v1/jobs/%s/stop" % self.id)

    def download_model(self, path=None):
        """Saves the trained model (.tsm) to `path` (default: ID.tsm here); returns the path."""
        path = path or self.id + ".tsm"
        c, r = self.platform._open("GET", "/api/v1/jobs/%s/model" % self.id)
        try:
            data = r.read()
        finally:
            c.close()
        if r.status >= 300:
            raise _error(r.status, data)
        tmp = path + ".part"
        with open(tmp, "wb") as f:
            f.write(data)
        _os.replace(tmp, path)
        return path

    def load_model(self):
        """The trained model as load_model() gives it: {name: array} and sparse tables."""
        from . import load_model
        return self._with_model(load_model)

    def load_into(self, module):
        """Copies the trained parameters into a torch module with the same parameter names."""
        from . import load_into
        self._with_model(lambda path: load_into(module, path))
        return module

    def _with_model(self, use):
        """use(path) of the model downloaded to a temporary file, removed afterwards."""
        import tempfile
        fd, path = tempfile.mkstemp(prefix="tessera-%s-" % self.id, suffix=".tsm")
        _os.close(fd)
        try:
            return use(self.download_model(path))
        finally:
            for p in (path, path + ".part"):
                try:
                    _os.remove(p)
                except FileNotFoundError:
                    pass


def _error(status, text):
    try:
        e = _json.loads(text)["error"]
        return PlatformError(e.get("message", ""), e.get("code", ""), status)
    except (ValueError, KeyError, TypeError):
        return PlatformError("the server answered HTTP %d: %s" % (status, text[:200]), "", status)


def _package(code, files):
    """A .tar.gz of the code and the files beside it, and the entry script's name."""
    entries = {}
    entry = "train.py"
    if callable(code):
        src = _textwrap.dedent(_inspect.getsource(code))
        entries["train.py"] = ("# Written by tessera.submit() from the function %s.\n%s\n\nif __name__ == \"__main__\":"
                               "\n    %s()\n" % (code.__name__, src, code.__name__)).encode()
    elif isinstance(code, str) and _os.path.isdir(code):
        for root, dirs, names in _os.walk(code):
            dirs[:] = sorted(d for d in dirs if d not in (".git", "__pycache__", ".ipynb_checkpoints", ".venv"))
            for n in sorted(names):
                full = _os.path.join(root, n)
                if _os.path.islink(full) or n.endswith(".pyc"):
                    continue
                with open(full, "rb") as f:
                    entries[_os.path.relpath(full, code)] = f.read()
    elif isinstance(code, str):
        with open(code, "rb") as f:
            entry = _os.path.basename(code)
            entries[entry] = f.read()
    else:
        raise PlatformError("code must be a function, a script's path or a directory")
    for name, data in files.items():
        entries[name] = data.encode() if isinstance(data, str) else data
    buf = _io.BytesIO()
    # No timestamps anywhere: the same files make the same package, stored once by the server.
    with _gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, \
            _tarfile.open(fileobj=gz, mode="w", format=_tarfile.PAX_FORMAT) as tar:
        for name in sorted(entries):
            info = _tarfile.TarInfo(name)
            info.size = len(entries[name])
            info.mode = 0o644
            tar.addfile(info, _io.BytesIO(entries[name]))
    data = buf.getvalue()
    if len(data) > 4 << 20:
        raise PlatformError("the package is %.1f MiB compressed, over the server's 4 MiB: put data in a data set"
                            % (len(data) / (1 << 20)))
    return data, entry

"""Tessera's Python API: train PyTorch models through Tessera's parameter servers.

A trainer script (it runs unchanged under `tessera local --trainer-cmd "python3 train.py"` and on
a cluster, taking its coordinates from the TESSERA_* environment):

    import tessera, torch
    tessera.init()                                    # connect, register this trainer
    model = torch.nn.Sequential(...)
    opt = tessera.Optimizer(model)                    # pservers hold the parameters now
    for batch in tessera.reader().batches(64):        # records of the tasks handed to us
        x, y = decode(batch)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward()
        opt.step(samples=len(batch), cost=loss.item()) # push gradients, pull new values
    tessera.finish()

The optimizer itself (SGD, momentum, Adagrad, Adam, FTRL-Proximal) runs on the pservers: the
job's, or the one named with Optimizer(model, optimizer="adam:lr=0.001") or, for a sparse table,
Embedding(name, dim, optimizer="ftrl:alpha=0.5,l1=0.001"). Parameters and gradients move between
torch's buffers and the network without copies through Python objects.

The platform (a `tessera server`) from a notebook or a script: tessera.connect(url, token) gives a
Platform whose submit() sends code (a function, a script, a directory) or a built-in model as a
job; the Job's metrics(follow=True), on("cost", fn), logs(follow=True), scale(n), wait() and
load_into(module) follow it and bring the trained model back (see platform.py).

Events: tessera.on("batch_end", fn) calls fn(info) after every step, tessera.on("pass_end", fn)
after each pass over the data (info has step, pass, samples, cost). Passes are numbered from 1,
as the console and `tessera local` show them.
"""

import atexit as _atexit
import os as _os
import signal as _signal
import threading as _threading

import numpy as _np

try:
    from . import _tessera
except ImportError as e:  # most often: another Python than the one the module was built for
    import sys as _sys
    raise ImportError("tessera's native module could not be loaded by %s (Python %d.%d): %s. It is built for "
                      "Debian's /usr/bin/python3; run your script with that." %
                      (_sys.executable, _sys.version_info[0], _sys.version_info[1], e)) from e
from ._tessera import Error
from .platform import Job, Platform, PlatformError, connect

__all__ = ["init", "session", "reader", "Optimizer", "Embedding", "report", "on", "is_evaluator",
           "save_model", "load_model", "load_into", "decode_images", "decode_examples", "finish", "Error",
           "connect", "Platform", "Job", "PlatformError"]

_session = None
_callbacks = {"batch_end": [], "pass_end": []}


def init(etcd=None, job=None, trainer_id=None, store=None, lease_ttl=0, timeout=300.0, log_level="info",
         transport=None, etcd_user=None, etcd_password=None, etcd_ca=None, etcd_cert=None, etcd_key=None,
         secret_file=None, etcd_credentials=None, tls_ca=None, tls_cert=None, tls_key=None):
    """Connects to the job and registers this trainer. Arguments left out come from the
    environment (TESSERA_ETCD, TESSERA_JOB, TESSERA_TRAINER_ID, TESSERA_STORE, TESSERA_LEASE_TTL,
    TESSERA_TRANSPORT, and for a secured cluster TESSERA_ETCD_USER, TESSERA_ETCD_PASSWORD or
    TESSERA_ETCD_CREDENTIALS, TESSERA_ETCD_CA, TESSERA_ETCD_CERT, TESSERA_ETCD_KEY,
    TESSERA_JOB_SECRET_FILE, and for a job created with --tls TESSERA_TLS_CA, TESSERA_TLS_CERT,
    TESSERA_TLS_KEY; see docs/security.md). `transport`: the data plane to the pservers, "auto" (shared memory with a
    pserver on this host, TCP otherwise; the default), "shm", "tcp" or "grpc".
    Returns the session (also kept as the module's default)."""
    global _session
    if _session is not None:
        raise Error("tessera.init() was already called in this process")
    job_name = job or _os.environ.get("TESSERA_JOB", "-")
    node = "trainer-" + (trainer_id or _os.environ.get("TESSERA_TRAINER_ID", "?"))
    _tessera.init_logging(job_name, node, log_level)
    _session = _tessera.Session(etcd=etcd, job=job, trainer_id=trainer_id, store=store, lease_ttl=lease_ttl,
                                timeout=timeout, transport=transport, etcd_user=etcd_user,
                                etcd_password=etcd_password, etcd_ca=etcd_ca, etcd_cert=etcd_cert,
                                etcd_key=etcd_key, secret_file=secret_file, etcd_credentials=etcd_credentials,
                                tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key)
    _leave_cleanly_on_exit()
    return _session


def _on_sigterm(signum, _frame):
    # SIGTERM (a scale-down, Ctrl-C of `tessera local`, a pod's termination) ends the script like
    # sys.exit(): finally blocks run, then finish() below says goodbye, so the job stops waiting
    # for this trainer at once instead of after its lease expires.
    raise SystemExit(128 + signum)


def _leave_cleanly_on_exit():
    _atexit.register(finish)
    # Only where nobody chose a handler, and only the main thread may set one.
    if (_threading.current_thread() is _threading.main_thread() and
            _signal.getsignal(_signal.SIGTERM) == _signal.SIG_DFL):
        _signal.signal(_signal.SIGTERM, _on_sigterm)


def session():
    """The session tessera.init() opened."""
    if _session is None:
        raise Error("call tessera.init() first")
    return _session


def on(event, fn):
    """Calls fn(info: dict) on "batch_end" (after every step) or "pass_end" (after each pass)."""
    if event not in _callbacks:
        raise ValueError("unknown event %r (expected one of %s)" % (event, ", ".join(sorted(_callbacks))))
    _callbacks[event].append(fn)


_firing = []  # the events whose callbacks are running


def _fire(event, info):
    if not _callbacks[event]:
        return
    _wait_for_step()  # a callback may read the parameters: they hold the last step's pull
    _firing.append(event)
    try:
        for fn in list(_callbacks[event]):
            fn(dict(info))
    finally:
        _firing.pop()


class _Progress:
    """What the callbacks see."""
    step = 0
    samples = 0
    cost = None


_progress = _Progress()


class Reader:
    """Records of a data set.

    reader() yields the records of the tasks the job's master hands to this trainer; reader(name)
    reads that data set in full from the store (for evaluation, also on the job's own training
    data), as does reader(name, store=DIR) without a job. Iterate over .batches(n) for lists of up to n records: a task is
    acknowledged only once the step that used its records is done (when the next batch is asked
    for), and while other trainers hold the rest of a pass this trainer takes part in the steps
    with empty gradients so nobody waits."""

    def __init__(self, dataset=None, store=None):
        self._local = None
        if store is not None:  # a data set read directly, no job needed
            if dataset is None:
                raise ValueError("reading from a store needs the data set's name")
            self._local = _tessera.LocalDataset(store, dataset)
            return
        s = session()
        if dataset is not None:
            self._local = _tessera.LocalDataset(s.store or _os.environ.get("TESSERA_STORE", ""), dataset)

    def batches(self, size):
        if size <= 0:
            raise ValueError("batch size must be positive, got %d" % size)
        if self._local is not None:
            self._local.rewind()
            while True:
                b = self._local.next_batch(size)
                if not b:
                    return
                yield b
        yield from self._dispatched(size)

    def __iter__(self):
        for b in self.batches(1):
            yield b[0]

    def _dispatched(self, size):
        if _firing:
            raise Error("reader() cannot hand out the job's tasks inside a %s callback (the trainer is "
                        "between steps there); to evaluate, read a whole data set with reader(name)" % _firing[-1])
        s = session()
        batch = []
        ended = -1  # the passes up to this one (0-based) have had their pass_end

        def passes_over():
            # Once the job is in pass p, every earlier pass is over everywhere (also for a trainer
            # that read none of its records): pass_end for the one that just ended, numbered
            # from 1 as everywhere else.
            nonlocal ended
            last = s.job_pass - 1
            if last > ended:
                ended = last
                _fire("pass_end", {"pass": last + 1, "step": s.step, "samples": _progress.samples,
                                   "cost": _progress.cost})

        while True:
            # Records in one call (next_records stops where the per-record loop would have to
            # look: at the record with which the job's pass moved on, a wait or the end).
            kind, recs = s.next_records(size - len(batch))
            last = None
            if kind == "record":
                batch.extend(recs[:-1])
                last = recs[-1]
            else:
                batch.extend(recs)
            if s.job_pass - 1 > ended and batch:
                # The records of the pass that ended are trained first.
                yield batch
                s.trained()
                batch = []
            passes_over()
            if last is not None:
                batch.append(last)
                if len(batch) < size:
                    continue
            if batch:
                yield batch
                s.trained()
                batch = []
            elif kind == "wait":
                s.idle()
            if kind == "done":
                return

    @property
    def records(self):
        """Records in a locally read data set (None for dispatched records)."""
        return self._local.records if self._local is not None else None


def reader(dataset=None, store=None):
    """See Reader. With `store`, reads `dataset` from that store without a job."""
    return Reader(dataset, store)


def decode_images(records):
    """Image records (e.g. Fashion-MNIST uploaded with --format idx) as (pixels uint8 [n, h*w],
    labels int64 [n], (h, w))."""
    return _tessera.decode_images(records)


def decode_examples(records):
    """Sparse records (a data set uploaded with --format libsvm) as CSR arrays:
    (ids uint64 [nnz], values float32 [nnz], offsets int64 [n + 1], labels float32 [n]);
    record i has features ids[offsets[i]:offsets[i+1]] with values[offsets[i]:offsets[i+1]].
    Raises ValueError naming the record for one that is not a libsvm example."""
    return _tessera.decode_examples(records)


def decode_csv(records, text_labels=False):
    """Records of a csv data set (uploaded with --format csv) as (features float32 [n, columns],
    labels float32 [n]); with text_labels=True the labels are a list of str as written (class
    names). Raises ValueError naming the first record that is not a csv record, has another
    number of columns than the first, or (without text_labels) has a label that is not a number."""
    return _tessera.decode_csv(records, text_labels)


def decode_text(records, columns=None):
    """Text records of comma-separated numbers (a data set uploaded with --format text, e.g. from
    a CSV file without its header) as a float32 array [n, columns]; `columns` defaults to the
    first record's. Raises ValueError naming the first record that is not `columns` numbers."""
    rows = []
    for i, r in enumerate(records):
        text = r.decode("utf-8", "replace") if isinstance(r, (bytes, bytearray)) else str(r)
        fields = text.strip().split(",")
        if columns is None:
            columns = len(fields)
        try:
            if len(fields) != columns:
                raise ValueError("%d fields" % len(fields))
            rows.append([float(f) for f in fields])
        except ValueError as e:
            raise ValueError("record %d is not %d comma-separated numbers (%s): %.80r" % (i, columns, e, text)) from None
    return _np.array(rows, dtype=_np.float32).reshape(len(rows), columns or 0)


def _float_view(t, what):
    import torch
    if t.device.type != "cpu" or t.dtype != torch.float32:
        raise TypeError("%s must be a float32 CPU tensor (got %s on %s)" % (what, t.dtype, t.device))
    if not t.is_contiguous():
        raise ValueError("%s is not contiguous" % what)
    return t.detach().numpy()


def _scale_into(buf, grad, scale):
    # buf (float32, CPU) = grad * scale, whatever grad's dtype and device: one copy.
    import torch
    if grad.dtype == buf.dtype and grad.device == buf.device:
        torch.mul(grad, scale, out=buf)
    else:
        buf.copy_(grad)
        buf.mul_(scale)


class Embedding:
    """A sparse embedding table held by the pservers: rows of `dim` floats keyed by any
    non-negative integer id, created on first use by `init` ("zeros", "uniform:-0.05,0.05",
    "normal:0,0.01"). Call it like torch.nn.Embedding; declare it before the Optimizer and pass
    it there (or make it an attribute of the model) so its rows' gradients are pushed.
    `optimizer`: this table's own (e.g. "ftrl:alpha=0.1,beta=0.01"; None: the job's).
    `limits`: keep it within memory on each pserver, e.g. "admit=2,evict_after=100000,budget=64MiB"
    or "admit_prob=0.2" (docs/sparse.md); "" keeps every row.
    `dtype`, `device`: what the looked-up rows are given as (torch.bfloat16, "cuda", ...; None:
    float32 on the CPU). The pservers keep float32; the rows' gradients come back in float32."""

    def __init__(self, name, dim, init="uniform:-0.05,0.05", optimizer=None, limits="", dtype=None, device=None):
        import torch
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError("embedding '%s': dtype must be floating point, got %s" % (name, dtype))
        self.name, self.dim, self.init, self.optimizer = name, int(dim), init, optimizer
        self.dtype, self.device = dtype, (torch.device(device) if device is not None else None)
        self._pending = []
        session().add_sparse(name, self.dim, init, optimizer, limits)

    def __call__(self, ids):
        import torch
        _wait_for_step()  # the rows must be the version the last step pulled
        flat = ids.reshape(-1)
        if flat.numel() and int(flat.min()) < 0:
            raise ValueError("embedding '%s': ids must be non-negative" % self.name)
        keys = _np.ascontiguousarray(flat.cpu().numpy().astype(_np.uint64))
        out = _np.empty((keys.size, self.dim), dtype=_np.float32)
        session().sparse_pull(self.name, keys, out)
        rows = torch.from_numpy(out)
        if torch.is_grad_enabled():
            rows.requires_grad_()
            self._pending.append((keys, rows))
        if self.dtype is not None or self.device is not None:
            rows = rows.to(device=self.device, dtype=self.dtype)  # differentiable: grads return as float32
        return rows.view(*ids.shape, self.dim)

    def _take_grads(self, scale):
        out = []
        for keys, rows in self._pending:
            if rows.grad is not None:
                out.append((self.name, keys, _np.ascontiguousarray(rows.grad.numpy() * scale, dtype=_np.float32)))
        self._pending = []
        return out


class Optimizer:
    """Trains `model` (a torch.nn.Module) through the pservers. Construction declares every
    parameter (by its name in model.named_parameters()) and every Embedding given or found among
    the model's attributes, initializes the pservers (one trainer's initial values win; the
    others start from them) and loads the current values into the model's own tensors.

    step(samples, cost) pushes this batch's gradients and pulls the next parameters in place.
    Gradients are taken as means over `samples` (the usual loss reduction); say loss="sum" if
    yours are sums. step() scales them (to sums) into buffers of its own, made once, and sends
    those: the .grad tensors are left as autograd made them. The model's tensors must stay where
    they are (no .to() or re-assignment). The Optimizer itself moves float32 parameters into the
    client's dense memory (same values, same Parameter objects), where a pserver on this host
    reads the step's gradients and writes the next values in place, with no copy here.

    Parameters may be of any floating dtype (float16, bfloat16, float32, float64) on any device:
    the pservers keep float32, and the Optimizer stages a parameter of another dtype or device
    through a float32 CPU copy of its own: each step's gradient is copied (and scaled) into it,
    and the pulled values are copied back into the parameter once they arrive (with wait=False,
    module by module, as each forward needs them).

    step(samples, cost, wait=False) returns at once, with the pulls still on their way: read
    and decode the next batch meanwhile. The model's forward then waits, module by module, only
    for the parameters that module uses (forward pre-hooks, set on the first such step). Where
    the step goes in place in the dense memory (float32 CPU parameters, a pserver on this host
    holding all of them), the pserver writes the values in order as its update makes them, and
    the first layer's forward begins as soon as its own are written, while the pserver still
    writes the others; the values are the same as after a waiting step. opt.wait() waits for
    all of them and returns what step() would have returned. Call it before reading the
    parameters any other way (state_dict, torch.save, your own code); tessera's own
    calls (backward, step, save_model, load_into, an Embedding lookup, finish) wait by themselves,
    and so does an event with callbacks (batch_end, pass_end) before it calls them.

    overlap=True pushes the gradients during backward instead: call opt.backward(loss, samples)
    in place of loss.backward(), then step(samples, cost). Each parameter's gradient is sent (in
    buckets of at least `bucket_bytes`) as soon as autograd has it, and the pservers apply a
    parameter every trainer has sent before the step's barrier; step() then waits for the rest
    (or, with wait=False, leaves each module's forward to wait for its own)."""

    def __init__(self, model, optimizer=None, embeddings=(), loss="mean", overlap=False, bucket_bytes=1 << 20):
        if loss not in ("mean", "sum"):
            raise ValueError("loss must be 'mean' or 'sum', got %r" % loss)
        if int(bucket_bytes) < 0:
            raise ValueError("bucket_bytes must be >= 0, got %r" % bucket_bytes)
        s = session()
        self._model = model
        self._loss = loss
        self._params = list(model.named_parameters())
        # The scaled gradients sent, one buffer per parameter, made on first use:
        # name -> (tensor, numpy view); and the request's list when every parameter has one.
        self._bufs = {}
        self._all_bufs = None
        # name -> float32 CPU copy of a parameter of another dtype or device (see above).
        self._staged = {}
        self._in_window = self._move_to_dense_memory(s)
        for name, p in self._params:
            s.add_dense(name, self._values_view(name, p), optimizer)
        self._by_name = dict(self._params)
        # overlap: gradients pushed in pieces during backward (see backward()), each bucket of
        # them sent when it fills.
        self._overlap = bool(overlap)
        self._bucket_floats = int(bucket_bytes) // 4
        self._samples = None
        self._pushed = False  # backward() pushed a step that step() has not waited for yet
        self._bucket, self._bucket_size = [], 0
        # A step sent with wait=False: the pieces pushed this step (name -> piece), how many,
        # those waited for, and the result of the last step waited for.
        self._piece_of, self._pieces, self._waited = {}, 0, set()
        self._in_flight = False
        self._background = False  # the step in flight is one push_pull(wait=False), run in the background
        self._took = True
        self._hooked = False
        if self._overlap:
            for name, p in self._params:
                p.register_hook(self._hook(name))
        found = [v for v in vars(model).values() if isinstance(v, Embedding)]
        self._embeddings = list(embeddings) + [e for e in found if e not in embeddings]
        if not self._params and not self._embeddings:
            raise ValueError("the model has no parameters to train")
        s.initialize()
        self._unstage()

    def _values_view(self, name, p):
        # What the session reads and writes a parameter's values through: the tensor itself for
        # a float32 CPU one, a float32 CPU copy otherwise (copied back by _unstage).
        import torch
        if p.device.type == "cpu" and p.dtype == torch.float32:
            return _float_view(p.data, "parameter '%s'" % name)
        if not p.dtype.is_floating_point:
            raise TypeError("parameter '%s' must be floating point (got %s)" % (name, p.dtype))
        staged = p.data.detach().to(device="cpu", dtype=torch.float32, copy=True).contiguous()
        self._staged[name] = staged
        return staged.numpy()

    def _unstage(self, names=None):
        # The values the last pull wrote into the float32 copies, into the parameters themselves.
        if not self._staged:
            return
        import torch
        with torch.no_grad():
            for name in (self._staged if names is None else names):
                staged = self._staged.get(name)
                if staged is not None:
                    self._by_name[name].data.copy_(staged)

    def _move_to_dense_memory(self, s):
        # Over shared memory a pserver reads a step's gradients and writes its values in place
        # when each lie back to back in the client's dense memory: the parameters move there (the
        # same values; the Parameter objects stay), and the scaled gradients are made there. For
        # float32 CPU parameters, once a session; elsewhere nothing changes.
        import torch
        if not self._params or any(p.device.type != "cpu" or p.dtype != torch.float32 for _, p in self._params):
            return False
        sizes = [p.numel() for _, p in self._params]
        total = sum(sizes)
        grads_at = (total + 15) // 16 * 16  # the gradients start on 64 bytes too
        try:
            memory = torch.from_numpy(s.dense_memory(grads_at + total))
        except Error:  # another Optimizer of this session took it
            return False
        at = 0
        for (name, p), n in zip(self._params, sizes):
            values = memory[at:at + n].view(p.shape)
            values.copy_(p.data)
            p.data = values
            g = memory[grads_at + at:grads_at + at + n].view(p.shape)
            self._bufs[name] = (g, _float_view(g, "gradient of '%s'" % name))
            at += n
        return True

    def _buffer(self, name):
        b = self._bufs.get(name)
        if b is None:
            import torch
            staged = self._staged.get(name)
            t = torch.empty_like(staged if staged is not None else self._by_name[name].data)
            b = self._bufs[name] = (t, _float_view(t, "gradient of '%s'" % name))
        return b

    def _hook(self, name):
        def hook(grad):
            if self._samples is None:
                raise Error("this Optimizer pushes gradients during backward (overlap=True): call "
                            "opt.backward(loss, samples) instead of loss.backward()")
            buf, view = self._buffer(name)
            scale = float(self._samples) if self._loss == "mean" else 1.0
            _scale_into(buf, grad.detach(), scale)  # sums: the pservers divide by the total samples
            self._bucket.append((name, view))
            self._bucket_size += buf.numel()
            if self._bucket_size >= self._bucket_floats:
                for n, _ in self._bucket:
                    self._piece_of[n] = self._pieces
                session().push_piece(self._bucket, [], int(self._samples), False)
                self._pieces += 1
                self._bucket, self._bucket_size = [], 0
        return hook

    def backward(self, loss, samples):
        """With overlap=True, in place of loss.backward(): runs backward and pushes the
        gradients in pieces as autograd produces them (the last layers' first), so they travel
        and are applied while the earlier layers' are computed; buckets of at least
        `bucket_bytes` go together. Then call step(samples, cost), which waits for them."""
        if not self._overlap:
            raise Error("backward() pushes during backward: construct the Optimizer with overlap=True")
        if samples <= 0:
            raise ValueError("samples must be positive, got %r" % samples)
        self.wait()
        self._samples = int(samples)
        self._piece_of, self._pieces, self._waited = {}, 0, set()
        try:
            loss.backward()
            scale = float(samples) if self._loss == "mean" else 1.0
            sparse = []
            for e in self._embeddings:
                sparse.extend(e._take_grads(scale))
            session().push_piece(self._bucket, sparse, int(samples), True)
        finally:
            self._bucket, self._bucket_size = [], 0
            self._samples = None
        self._pushed = True

    def zero_grad(self):
        # Embedding rows looked up since the last step keep their (fresh) gradients: zero_grad
        # usually comes between the forward pass and backward().
        for _, p in self._params:
            p.grad = None

    def step(self, samples, cost=None, wait=True):
        """Pushes the gradients of a batch of `samples` samples (cost: its mean loss, for
        progress) and pulls the next version. Returns False if the step went on without this
        trainer's gradient: the group changed, or the gradient held NaN or infinity and the job's
        non-finite policy is "skip" (with "error", tessera.Error is raised instead).
        wait=False returns None at once, the pulls still on their way; the model's forward waits
        for the parameters each module uses, and opt.wait() returns what step() would have."""
        if samples <= 0:
            raise ValueError("samples must be positive, got %r" % samples)
        s = session()
        if self._overlap:
            if not self._pushed:
                raise Error("with overlap=True, call opt.backward(loss, samples) before step()")
            self._pushed = False
            self._background = False
            return self._sent(s, samples, cost, wait)
        self.wait()
        scale = float(samples) if self._loss == "mean" else 1.0
        # In dense memory the gradients go through their buffers there even unscaled: the copy
        # into them stands for the transport's, and the reply then lands in place.
        dense = self._scaled(scale, copy=scale != 1.0 or not wait or self._in_window or bool(self._staged))
        sparse = []
        for e in self._embeddings:
            sparse.extend(e._take_grads(scale))
        self._piece_of, self._pieces, self._waited = {}, 0, set()
        took = s.push_pull(dense, sparse, int(samples), wait)
        self._background = not wait
        if wait:
            # Done already: what push_pull says is the step's answer (there is nothing to settle).
            self._unstage()
            self._took = took
            self._account(s, samples, cost)
            return took
        return self._sent(s, samples, cost, wait)

    def _scaled(self, scale, copy):
        # [(name, gradient sums)]: each .grad times `scale` in this Optimizer's buffer (copy), or
        # the .grad itself. The pservers take sums and divide by the step's total samples.
        if copy:
            complete = True
            for name, p in self._params:
                if p.grad is None:
                    complete = False
                    continue
                _scale_into(self._buffer(name)[0], p.grad.detach(), scale)
            if complete:
                if self._all_bufs is None:
                    self._all_bufs = [(name, self._bufs[name][1]) for name, _ in self._params]
                return self._all_bufs
            return [(name, self._bufs[name][1]) for name, p in self._params if p.grad is not None]
        return [(name, _float_view(p.grad.detach(), "gradient of '%s'" % name)) for name, p in self._params
                if p.grad is not None]

    def _sent(self, s, samples, cost, wait):
        # The step's push is on its way (every piece sent): wait for it, or leave it to the
        # model's forward (wait=False).
        global _in_flight
        self._in_flight = True
        _in_flight = self
        took = self.wait() if wait else None
        if not wait:
            self._hook_forward()
        self._account(s, samples, cost)
        return took

    def wait(self):
        """Waits until the parameters hold the version the last step pulled (after
        step(wait=False)); returns what that step() would have returned. Nothing to wait for: the
        last step's result."""
        global _in_flight
        if self._in_flight:
            self._in_flight = False
            if _in_flight is self:
                _in_flight = None
            self._took = session().settle()
            self._unstage()
        return self._took

    def _hook_forward(self):
        # Forward pre-hooks on every module that holds parameters directly: each waits for the
        # pieces carrying that module's parameters (a parameter not in any piece comes with the
        # step's last one, which brings every parameter back).
        if self._hooked:
            return
        self._hooked = True
        names = {id(p): name for name, p in self._params}
        for module in self._model.modules():
            mine = [names[id(p)] for p in module.parameters(recurse=False) if id(p) in names]
            if mine:
                module.register_forward_pre_hook(self._waiter(mine))

    def _waiter(self, names):
        def pre_hook(_module, _inputs):
            if not self._in_flight:
                return None
            s = session()
            if self._background:
                # One push and pull a step: where it went in place in the dense memory, the pserver
                # writes the values in order as it makes them, and this module begins as soon as
                # its own are there (the first layer's while the others are still being written).
                if not s.values_ready(names):
                    self.wait()  # the step ended first (or nothing could tell): settle it
                return None
            last = self._pieces
            for name in names:
                i = self._piece_of.get(name, last)
                if i not in self._waited:
                    self._waited.add(i)
                    if not s.wait_piece(i):
                        self.wait()  # an error, a dropped gradient or a changed group: settle it all
                        return None
            if len(self._waited) > last:
                self.wait()
            else:
                self._unstage(names)
            return None
        return pre_hook

    def _account(self, s, samples, cost):
        _progress.step = s.step
        _progress.samples += int(samples)
        if cost is not None:
            _progress.cost = float(cost)
            s.report(int(samples), float(cost) * samples)
        else:
            s.report(int(samples), 0.0)
        _fire("batch_end", {"step": s.step, "pass": s.pass_ + 1, "samples": _progress.samples, "cost": _progress.cost})


_in_flight = None  # the Optimizer whose step(wait=False) has pulls on their way


def _wait_for_step():
    # Before anything that reads or writes the parameters, or the pservers' version of them.
    if _in_flight is not None:
        _in_flight.wait()


def report(cost=None, samples=0, metrics=None, pass_=None):
    """Progress for the job's console: `samples` trained at mean cost `cost`, and/or evaluation
    `metrics` (a dict of name -> value) for pass `pass_`, numbered from 1 as pass_end's info
    (default: the current one)."""
    s = session()
    if samples:
        s.report(int(samples), float(cost or 0.0) * int(samples))
    if metrics:
        if pass_ is not None and int(pass_) < 1:
            raise ValueError("passes are numbered from 1, got %r" % pass_)
        s.report_metrics({str(k): float(v) for k, v in metrics.items()}, s.pass_ if pass_ is None else int(pass_) - 1)


def is_evaluator():
    """Whether this trainer is the lowest-numbered live one (the one that should evaluate)."""
    return session().is_evaluator()


def save_model(path, timeout=300.0):
    """Writes every parameter of the job, read from the pservers with all shards merged, to a
    Tessera model file (.tsm) that `tessera` tools and load_model() read."""
    _wait_for_step()  # the last step's push is part of the model
    _tessera.export_model(session(), path, timeout)


def load_model(path):
    """A .tsm file as {name: float32 array} (dense) and {name: (uint64 keys, float32 rows)}
    (sparse tables). The file's checksum is verified."""
    return _tessera.read_model(path)


def load_into(model, path):
    """Copies the dense tensors of a .tsm file into `model`'s parameters of the same names.
    Raises Error naming any parameter that is missing or has another size."""
    import torch
    _wait_for_step()  # a pull still on its way would overwrite what is copied in
    tensors = load_model(path)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name not in tensors:
                raise Error("model file %s has no parameter '%s'" % (path, name))
            v = tensors[name]
            if isinstance(v, tuple) or v.size != p.numel():
                raise Error("parameter '%s' in %s has %s values, the model %d" %
                            (name, path, "sparse" if isinstance(v, tuple) else v.size, p.numel()))
            p.copy_(torch.from_numpy(v).view_as(p))


def finish():
    """Acknowledges what was trained, flushes progress and deregisters this trainer."""
    global _session
    if _session is not None:
        try:
            _wait_for_step()
        finally:
            _session.close()
            _session = None

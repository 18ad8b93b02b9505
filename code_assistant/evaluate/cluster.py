"""The cases on a Dask cluster (`eval --cluster local` starts one on 127.0.0.1; `--cluster tls://HOST:8786` joins a
running one): each case one task, results streamed back as they finish (`as_completed`), written by the eval's own
process as on one machine.

A scheduler is a door: whoever can talk to it submits a function, and a worker runs it, as the user, outside every
sandbox. A PyPI case's build backend runs in the sandbox with the network on, and 127.0.0.1 is on that network. So
the cluster has a lock: the local one is started with Dask's TLS and a temporary certificate authority made in this
process's memory (Security.temporary(): never written to disk, not in any environment), and both ends demand a
certificate it signed — a connection without one is refused at the handshake, before Dask reads a byte. A running
scheduler is joined only over tls://, with the certificates Dask's configuration names (docs/eval.md); a plain
tcp:// one has no lock and is refused. A case on a worker runs exactly as here (case_run.run_case: the same sandbox,
the same scrubbed environment for the tests).

Why Dask (distributed) rather than Ray: it is pure Python (about 50 MB with its dependencies, against Ray's 265 MB
wheel and its raylet, GCS and object-store daemons), a local cluster starts in about a second (Ray's `init` took 4 s
here, and 1 s more to shut down) and binds where it is told (`host="127.0.0.1"`), and it writes nothing to HOME (Ray
writes an auth token to ~/.ray). Our tasks need nothing Ray adds: each is a subprocess that runs for seconds to
minutes and returns a small record. What a case is given:
- its CPU share: one worker thread. A worker started with `--nthreads 1` (the local cluster's are) runs one case at
  a time; start as many workers on a machine as cases it should run at once (`dask worker ADDRESS --nworkers N
  --nthreads 1`). A share is a slot, not a cgroup: the agent and its tests may use more than one core.
- its scratch space: a directory of its own under the worker's `local_directory` (`dask worker
  --local-directory`), removed when the case ends.
A worker needs this package installed, the toolchains its cases test with, and the model server's address and key
in its environment or in the options; a case whose repository is a path needs that path on the worker.
"""
from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from code_assistant.errors import ConfigError
from code_assistant.evaluate.case_run import CaseInterrupted, CasePhase, CaseRun, EvalConfig, Phase, Watch, run_case
from code_assistant.evaluate.cases import Case

logger = logging.getLogger(__name__)

LOCAL = "local"
TLS = "tls://"
DEFAULT_PORT = 8786  # a scheduler's, when the address names none
PROBE_S = 10.0  # how long the first connection to a scheduler may take (a refused one fails at once)
INSTALL = "pip install 'code-assistant[cluster]' (or: pip install distributed cryptography)"
# what Dask's configuration must name to join a running scheduler (docs/eval.md)
TLS_CONFIG = ("DASK_DISTRIBUTED__COMM__TLS__CA_FILE", "DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT",
              "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY")


def check_address(address: str) -> str:
    """`local` or a tls:// scheduler address; any other is a ConfigError that says why."""
    if address == LOCAL or (address.startswith(TLS) and len(address) > len(TLS)):
        return address
    raise ConfigError(f"eval --cluster: {address!r} is not local or tls://HOST:PORT (a scheduler without TLS runs "
                      "whatever anyone who reaches it submits; see docs/eval.md)")


def reachable(address: str) -> None:
    """A scheduler that refuses the connection (nothing listens there) is a ConfigError at once: Dask's client would
    retry it for its whole timeout."""
    host, _, port = address[len(TLS):].rpartition(":")
    if not host or not port.isdigit():
        host, port = address[len(TLS):], str(DEFAULT_PORT)
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=PROBE_S).close()
    except OSError as exc:
        raise ConfigError(f"eval: no Dask scheduler answered at {address}: {exc.strerror or exc}") from None


def on_worker(case: Case, config: EvalConfig, topic: str) -> CaseRun | None:
    """A task: the case in a scratch directory under the worker's own, each phase sent to the eval as an event of
    `topic` (over the cluster's own TLS connections); None when it was stopped from outside."""
    from distributed import get_worker

    worker = get_worker()

    def told(phase: CasePhase) -> None:
        worker.log_event(topic, {"case": phase.case, "phase": phase.phase.value, "iteration": phase.iteration})
    try:
        run = run_case(case, config, scratch_root=str(worker.local_directory), watch=told)
    except CaseInterrupted:
        return None
    return replace(run, result=replace(run.result, worker=str(worker.address)))


class DaskCluster:
    """A Dask client: to a local cluster of `workers` single-threaded worker processes on 127.0.0.1 started here
    (address LOCAL), its every connection TLS with a temporary CA; or over TLS to the scheduler at `address`."""

    def __init__(self, address: str, workers: int, *, quiet: bool = True) -> None:
        check_address(address)
        try:
            from distributed import Client, LocalCluster
            from distributed.security import Security
        except ImportError:
            raise ConfigError(f"eval --cluster needs Dask's distributed: {INSTALL}") from None
        self.cluster: Any = None
        level = logging.ERROR if quiet else logging.INFO
        logging.getLogger("distributed").setLevel(level)  # its nanny and scheduler say their closing as warnings
        if address == LOCAL:
            try:
                security = Security.temporary()  # a CA, and one certificate for every role, in memory only
            except ImportError:
                raise ConfigError(f"eval --cluster local needs the cryptography package: {INSTALL}") from None
            self.cluster = LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True,
                                        protocol=TLS, host="127.0.0.1", dashboard_address=None, silence_logs=level,
                                        security=security)
            self.client = Client(self.cluster, security=security)
        else:
            security = Security(require_encryption=True)  # the certificates Dask's configuration names
            if not (security.tls_ca_file and security.tls_client_cert):
                raise ConfigError(f"eval --cluster {address}: Dask's configuration names no CA and client "
                                  f"certificate: set {', '.join(TLS_CONFIG)} (docs/eval.md)")
            reachable(address)
            try:
                self.client = Client(address, timeout="30s", security=security)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"eval: no Dask scheduler answered at {address}: {exc}") from None

    def run(self, cases: list[Case], config: EvalConfig, watch: Watch) -> Iterator[CaseRun]:
        """Each case's phases come back as events of this eval's topic (`watch` is called from the client's thread);
        the agent's log comes back with its result, as text (a worker may be another machine)."""
        from distributed import as_completed

        config = replace(config, logs=None)
        batch = uuid.uuid4().hex[:8]  # a scheduler may hold an earlier eval's tasks of the same cases
        topic = f"eval-{batch}-phases"

        def told(event: tuple[float, dict[str, Any]]) -> None:
            msg = event[1]
            watch(CasePhase(str(msg["case"]), Phase(msg["phase"]), int(msg["iteration"])))
        self.client.subscribe_topic(topic, told)
        futures = [self.client.submit(on_worker, case, config, topic, key=f"eval-{batch}-{case.id}", pure=False)
                   for case in cases]
        try:
            for future in as_completed(futures):
                run = future.result()
                if run is not None:
                    yield run
        finally:
            self.client.cancel([f for f in futures if not f.done()])
            self.client.unsubscribe_topic(topic)

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()

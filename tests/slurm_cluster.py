"""A real single-node SLURM cluster for tests: install, configure, start, stop.

The cluster is private to one test session: its ``slurm.conf``, munge key,
sockets, state, spool and log directories all live under a fresh directory
the harness creates in the system temporary directory and removes on stop
(munged wants every directory above its socket world-traversable, which a
pytest ``tmp_path`` is not); the daemons listen on free ports; clients reach
it through ``SLURM_CONF`` (see :attr:`SlurmCluster.env`). Nothing under ``/etc`` is
written. One link outside that directory is unavoidable: the Snakemake
jobstep executor strips every ``SLURM_*`` variable (``SLURM_CONF`` included)
before its nested ``srun``, which then looks for ``/etc/slurm/slurm.conf`` and
next for ``/run/slurm/conf/slurm.conf`` (the configless cache path). The
harness links the latter to its configuration while the cluster runs, and
refuses to run where either path already exists, so that it never shadows
or takes over a real cluster's configuration.

Daemons (``munged``, ``slurmctld``, ``slurmd``) run in the foreground as
children of this process, so they are stopped by PID and verified gone.
Running the daemons needs root (``slurmd`` launches jobs as their owner and
``SlurmUser=root`` keeps the configuration minimal); installing the Debian
packages needs root and ``apt-get`` (``install.sh --system`` installs the
same packages ahead of time).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

#: Debian packages that provide the daemons, the client commands and munge.
SLURM_PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
#: Executables the harness and Snakemake's SLURM executor run; all come from
#: :data:`SLURM_PACKAGES`.
SLURM_EXECUTABLES = (
    "munged", "slurmctld", "slurmd", "sinfo", "squeue", "sbatch", "srun",
    "scontrol", "scancel",
)
PARTITION = "debug"
#: Where SLURM commands look for a configuration when ``SLURM_CONF`` is unset.
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
RUNTIME_CONF = Path("/run/slurm/conf/slurm.conf")
#: Seconds a finished job stays visible to ``squeue``; the snakemake
#: executor's ``squeue`` status command needs it well above its polling
#: interval, otherwise the executor falls back to ``sacct``.
MIN_JOB_AGE_S = 600


class SlurmSetupError(RuntimeError):
    """The single-node cluster could not be installed or started."""


def missing_executables() -> list[str]:
    """Names in :data:`SLURM_EXECUTABLES` that are not on ``PATH``."""
    return [name for name in SLURM_EXECUTABLES if shutil.which(name) is None]


def unavailable_reason() -> str | None:
    """Why a single-node cluster cannot be run here, or None if it can.

    Returns
    -------
    str or None
        A sentence naming the missing prerequisite (non-Linux platform, not
        root, SLURM absent and no ``apt-get`` to install it).
    """
    if not sys.platform.startswith("linux"):
        return f"a single-node SLURM cluster needs Linux (platform is {sys.platform})"
    if os.geteuid() != 0:
        return f"starting slurmctld/slurmd/munged needs root (tests run as uid {os.geteuid()})"
    for existing in (SYSTEM_CONF, RUNTIME_CONF):
        if existing.exists() or existing.is_symlink():
            stale = existing.is_symlink() and "cbmm-slurm-" in os.readlink(existing)
            return (
                f"{existing} exists: jobs' nested srun would use that cluster, and the "
                "harness does not replace another cluster's configuration"
                + (" (it links to an earlier, interrupted test cluster: stop that "
                   "cluster's daemons and remove the link)" if stale else "")
            )
    missing = missing_executables()
    if missing and shutil.which("apt-get") is None:
        return (
            f"SLURM is not installed ({', '.join(missing)} missing) and apt-get is "
            f"not available to install {' '.join(SLURM_PACKAGES)}"
        )
    return None


def install_slurm(timeout_s: float = 900) -> None:
    """Install :data:`SLURM_PACKAGES` with apt-get unless already present.

    Raises
    ------
    SlurmSetupError
        If apt-get fails (the tail of its output is included) or the
        executables are still missing afterwards.
    """
    if not missing_executables():
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *SLURM_PACKAGES],
    ):
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=timeout_s
        )
        if done.returncode != 0:
            raise SlurmSetupError(
                f"`{' '.join(command)}` failed with exit code {done.returncode}:\n"
                f"{(done.stdout + done.stderr)[-3000:]}"
            )
    still_missing = missing_executables()
    if still_missing:
        raise SlurmSetupError(
            f"after installing {' '.join(SLURM_PACKAGES)}, still missing: "
            f"{', '.join(still_missing)}"
        )


@dataclass
class SlurmCluster:
    """A running single-node cluster (see :func:`start_slurm_cluster`).

    Attributes
    ----------
    root : Path
        Directory holding the configuration, state, spool and logs (removed
        by :func:`stop_slurm_cluster`).
    conf : Path
        The cluster's ``slurm.conf``.
    node : str
        Node name (the short host name, which ``slurmd`` identifies itself by).
    cpus, real_memory_mb : int
        What the node offers to jobs.
    processes : dict of str to subprocess.Popen
        The daemons this harness started, in start order.
    runtime_link : Path or None
        The ``/run/slurm/conf/slurm.conf`` link to ``conf``, once made.
    """

    root: Path
    conf: Path
    node: str
    cpus: int
    real_memory_mb: int
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    runtime_link: Path | None = None

    @property
    def env(self) -> dict[str, str]:
        """``os.environ`` plus ``SLURM_CONF`` pointing at this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *command: str, check: bool = True, timeout_s: float = 30
            ) -> subprocess.CompletedProcess:
        """Run a SLURM client command against this cluster and capture its output."""
        done = subprocess.run(
            command, env=self.env, capture_output=True, text=True, timeout=timeout_s
        )
        if check and done.returncode != 0:
            raise SlurmSetupError(
                f"`{' '.join(command)}` failed ({done.returncode}): {done.stderr.strip()}"
            )
        return done

    def node_state(self) -> str:
        """The node's state as ``sinfo`` prints it (``idle``, ``mix``, ``down*`` ...)."""
        done = self.run("sinfo", "--noheader", "--Node", "--format=%t", check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    def log_tail(self, n_chars: int = 2000) -> str:
        """The end of each daemon log, for error messages."""
        parts = []
        for log in sorted((self.root / "log").glob("*.log")):
            parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-n_chars:]}")
        return "\n".join(parts)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _real_memory_mb() -> int:
    """90% of MemTotal in MiB: slurmd drains a node configured above what it finds."""
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemTotal:"):
                return int(int(line.split()[1]) / 1024 * 0.9)
    raise SlurmSetupError("/proc/meminfo has no MemTotal line")


def write_slurm_conf(root: Path, node: str, cpus: int, real_memory_mb: int) -> Path:
    """Write a minimal single-node ``slurm.conf`` (no accounting) under ``root``.

    Parameters
    ----------
    root : Path
        The cluster's directory; ``state/``, ``spool/``, ``run/``, ``log/``
        and ``munge-run/`` below it are named in the configuration.
    node : str
        Node name; must be the short host name so that ``slurmd`` finds itself.
    cpus, real_memory_mb : int
        CPUs and memory the node offers.

    Returns
    -------
    Path
        The written configuration file.
    """
    lines = [
        "ClusterName=cbmmtest",
        f"SlurmctldHost={node}(127.0.0.1)",
        f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root / 'munge-run' / 'munge.socket'}",
        "MpiDefault=none",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SchedulerType=sched/backfill",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "ReturnToService=2",
        f"MinJobAge={MIN_JOB_AGE_S}",
        "MailProg=/bin/true",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'run' / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} "
        f"RealMemory={real_memory_mb} State=UNKNOWN",
        f"PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP",
    ]
    conf = root / "slurm.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def _write_munge_key(path: Path) -> None:
    """A fresh 1 KiB key, mode 0400 in a 0700 directory, as munged insists."""
    path.parent.mkdir(mode=0o700, exist_ok=True)
    path.write_bytes(os.urandom(1024))
    path.chmod(0o400)


def _spawn(cluster: SlurmCluster, name: str, command: list[str]) -> None:
    out = open(cluster.root / "log" / f"{name}.stdout.log", "wb")
    try:
        cluster.processes[name] = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=cluster.env, start_new_session=True,
        )
    finally:
        out.close()


def _wait_until(predicate, timeout_s: float, what: str, cluster: SlurmCluster) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for name, process in cluster.processes.items():
            if process.poll() is not None:
                raise SlurmSetupError(
                    f"{name} exited with code {process.returncode} while waiting for "
                    f"{what}\n{cluster.log_tail()}"
                )
        if predicate():
            return
        time.sleep(0.5)
    raise SlurmSetupError(f"timed out after {timeout_s:.0f} s waiting for {what}\n"
                          f"{cluster.log_tail()}")


def start_slurm_cluster(*, cpus: int | None = None, timeout_s: float = 90
                        ) -> SlurmCluster:
    """Configure and start munged, slurmctld and slurmd; wait until the node is idle.

    Parameters
    ----------
    cpus : int, optional
        CPUs of the node; defaults to the CPUs this process may use (nproc).
    timeout_s : float
        How long to wait for the node to become idle.

    Returns
    -------
    SlurmCluster
        The running cluster; stop it with :func:`stop_slurm_cluster`.

    Raises
    ------
    SlurmSetupError
        If a daemon exits or the node is not idle in time (daemon logs included).
    """
    root = Path(tempfile.mkdtemp(prefix="cbmm-slurm-")).resolve()
    root.chmod(0o755)
    for sub in ("state", "spool", "log", "run", "munge-run"):
        (root / sub).mkdir(mode=0o755, exist_ok=True)
    cpus = cpus or len(os.sched_getaffinity(0))
    node = socket.gethostname().split(".")[0]
    memory = _real_memory_mb()
    cluster = SlurmCluster(root=root, conf=write_slurm_conf(root, node, cpus, memory),
                           node=node, cpus=cpus, real_memory_mb=memory)
    key = root / "munge" / "munge.key"
    _write_munge_key(key)
    socket_path = root / "munge-run" / "munge.socket"
    try:
        RUNTIME_CONF.parent.mkdir(parents=True, exist_ok=True)
        RUNTIME_CONF.symlink_to(cluster.conf)  # fails if present: never replace one
        cluster.runtime_link = RUNTIME_CONF
        _spawn(cluster, "munged", [
            "munged", "--foreground", f"--socket={socket_path}", f"--key-file={key}",
            f"--log-file={root / 'log' / 'munged.log'}",
            f"--pid-file={root / 'munge-run' / 'munged.pid'}",
            f"--seed-file={root / 'munge' / 'munged.seed'}",
        ])
        _wait_until(socket_path.exists, 20, "the munge socket", cluster)
        # -i: ignore stale state (there is none in a fresh root, but be explicit).
        _spawn(cluster, "slurmctld", ["slurmctld", "-D", "-i", "-f", str(cluster.conf)])
        _wait_until(lambda: cluster.run("scontrol", "ping", check=False).returncode == 0,
                    timeout_s, "slurmctld to answer `scontrol ping`", cluster)
        _spawn(cluster, "slurmd", ["slurmd", "-D", "-f", str(cluster.conf)])
        _wait_until(lambda: cluster.node_state() == "idle", timeout_s,
                    f"node {node} to be idle in sinfo", cluster)
    except BaseException:
        stop_slurm_cluster(cluster)
        raise
    return cluster


def stop_slurm_cluster(cluster: SlurmCluster, timeout_s: float = 20) -> None:
    """Cancel remaining jobs, stop the daemons by PID, remove the link and directory.

    Each daemon gets SIGTERM, then SIGKILL after ``timeout_s``; the function
    returns only once every one of them has exited. The runtime configuration
    link is removed only if it still points at this cluster's ``slurm.conf``.

    Raises
    ------
    SlurmSetupError
        If a daemon is still running after SIGKILL.
    """
    if "slurmctld" in cluster.processes and cluster.processes["slurmctld"].poll() is None:
        cluster.run("scancel", "--user", "root", check=False)
    for name, process in reversed(list(cluster.processes.items())):
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout_s)
        if process.poll() is None:
            raise SlurmSetupError(f"{name} (pid {process.pid}) did not exit")
    link = cluster.runtime_link
    if link is not None and link.is_symlink() and link.resolve() == cluster.conf:
        link.unlink()
        cluster.runtime_link = None
    shutil.rmtree(cluster.root, ignore_errors=True)


@contextlib.contextmanager
def single_node_slurm(**kwargs) -> Iterator[SlurmCluster]:
    """Context manager: :func:`start_slurm_cluster` on entry, stop on exit."""
    cluster = start_slurm_cluster(**kwargs)
    try:
        yield cluster
    finally:
        stop_slurm_cluster(cluster)


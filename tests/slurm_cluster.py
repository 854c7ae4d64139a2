"""A real single-node SLURM cluster on this machine, for the sweep's SLURM launcher tests: Debian's
munged, slurmctld and slurmd, started in the foreground from a temporary folder (its own munge key
and socket, a slurm.conf with this host as controller and node on loopback ports, linuxproc process
tracking, no task plugin, no accounting), and stopped afterwards. Clients find it through
SLURM_CONF (`LocalSlurm.env`). `.ci/run` installs the packages (slurm-wlm, munge); where they are
absent, `missing_binaries()` names them and the tests skip with that reason."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from helpers import free_ports, stop_process

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo")


def missing_binaries() -> list[str]:
    return [b for b in BINARIES if shutil.which(b) is None and not Path("/usr/sbin", b).is_file()]


def _binary(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def slurm_conf(f: Path, socket_path: Path, ctld_port: int, node_port: int, cpus: int) -> str:
    """slurm.conf of a one-node cluster on this machine, on loopback, run as this user."""
    host, user = socket.gethostname(), getpass.getuser()
    return "\n".join(
        [
            "ClusterName=harness-test",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={node_port}",
            f"SlurmUser={user}",
            f"SlurmdUser={user}",
            "AuthType=auth/munge",
            f"AuthInfo=socket={socket_path}",
            "CredType=cred/munge",
            f"StateSaveLocation={f / 'state'}",
            f"SlurmdSpoolDir={f / 'spool'}",
            f"SlurmctldPidFile={f / 'slurmctld.pid'}",
            f"SlurmdPidFile={f / 'slurmd.pid'}",
            f"SlurmctldLogFile={f / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={f / 'log' / 'slurmd.log'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "MpiDefault=none",
            "ReturnToService=2",
            "SchedulerType=sched/builtin",
            "KillWait=30",
            "MinJobAge=600",
            f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


class LocalSlurm:
    """`with LocalSlurm(folder) as cluster:` a controller and one node (this host, `cpus` CPUs)."""

    def __init__(self, folder: Path, cpus: int = 2) -> None:
        self.folder, self.cpus = Path(folder), cpus
        self.processes: list[subprocess.Popen] = []
        self.conf = self.folder / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run([_binary(args[0]), *args[1:]], env=self.env, capture_output=True, text=True, timeout=60)
        if check and proc.returncode:
            raise RuntimeError(f"{' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    def __enter__(self) -> "LocalSlurm":
        f = self.folder
        for sub in ("munge", "state", "spool", "log"):
            (f / sub).mkdir(parents=True, exist_ok=True)
        (f / "munge").chmod(0o700)
        key = f / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        socket_path = f / "munge" / "munge.socket"
        self._start(
            [
                _binary("munged"),
                "--foreground",
                "--force",
                f"--key-file={key}",
                f"--socket={socket_path}",
                f"--pid-file={f / 'munge' / 'munged.pid'}",
                f"--log-file={f / 'log' / 'munged.log'}",
                f"--seed-file={f / 'munge' / 'munged.seed'}",
            ],
            f / "log" / "munged.out",
        )
        self._wait(socket_path.exists, "munged did not create its socket")
        ctld_port, node_port = free_ports(2)
        self.conf.write_text(slurm_conf(f, socket_path, ctld_port, node_port, self.cpus))
        self._start([_binary("slurmctld"), "-D", "-c", "-f", str(self.conf)], f / "log" / "slurmctld.out")
        self._start([_binary("slurmd"), "-D", "-f", str(self.conf)], f / "log" / "slurmd.out")
        self._wait(
            lambda: self.run("sinfo", "-h", "-o", "%T", check=False).strip() == "idle", "the node did not come up idle"
        )
        return self

    def _start(self, command: list[str], output: Path) -> None:
        with open(output, "wb") as out:
            self.processes.append(
                subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
            )

    def _wait(self, ready, what: str, timeout: float = 60.0) -> None:
        deadline = time.time() + timeout
        while not ready():
            if time.time() > deadline or any(p.poll() is not None for p in self.processes):
                logs = "\n".join(p.read_text(errors="replace")[-1500:] for p in (self.folder / "log").glob("*"))
                self.__exit__(None, None, None)
                raise RuntimeError(f"local SLURM cluster: {what}\n{logs}")
            time.sleep(0.2)

    def __exit__(self, *exc) -> None:
        if shutil.which("scancel"):
            self.run("scancel", "--user", getpass.getuser(), check=False)
        for proc in reversed(self.processes):  # slurmd, slurmctld, munged
            stop_process(proc, timeout=30)
        self.processes.clear()

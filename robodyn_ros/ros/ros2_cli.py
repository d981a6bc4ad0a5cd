"""What a ROS 2 user runs, driven from tests and tools: a colcon workspace holding this package, ``ros2
launch`` and ``ros2 run`` started as a terminal would start them, the ``ros2`` verbs, and what a process
leaves behind (exit codes, tracebacks, Fast DDS shared-memory segments).

Needs the ROS 2 command line (``ros2``, ``colcon``, ``launch_ros``) in the active environment: a ROS
install, or, next to the pip wheels of ``pip install ".[ros]"``, the upstream sources that
``../shared/ros2-cli/install.sh`` installs (:func:`missing`). Never imported by the nodes.

    env = build_workspace(tmp_dir)                  # colcon build, then install/setup.sh sourced
    with Launched(["ros2", "launch", "robodyn_ros", "simulation.launch.py"], env) as launch:
        ...                                         # ros2(env, "node", "list"), ...
        launch.ctrl_c()                             # SIGINT to the process group, as the terminal sends
        stopped = launch.wait(timeout=30.0)
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from ..kernels.process_tree import descendants

PACKAGE = "robodyn_ros"
CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# where the ROS 2 command line sources are, beside the checkout (CI) unless ROBODYN_ROS2_CLI says
ROS2_CLI_SOURCES = os.environ.get("ROBODYN_ROS2_CLI", os.path.join(os.path.dirname(CHECKOUT), "shared", "ros2-cli"))
# the files of the checkout a workspace's copy leaves out (caches, builds, the venv's egg-info, git)
NOT_COPIED = shutil.ignore_patterns(".git", "__pycache__", "*.egg-info", "build", "install", "log", ".pytest_cache",
                                    "*.so", "*.png", "*.json", "*.mcap", "*.db3")
TRACEBACK = re.compile(r"Traceback \(most recent call last\)|\[FATAL\]|RuntimeError|KeyboardInterrupt|Exception in ")


def tool_path(path=None):
    """``PATH`` (default this process's) with this interpreter's ``bin`` first, where ``pip`` and
    ``install.sh`` put ``ros2`` and ``colcon`` (also when the environment is not activated)."""
    return os.pathsep.join([os.path.dirname(sys.executable), path or os.environ.get("PATH", "")])


def missing():
    """Why the ROS 2 command line cannot be used here (one sentence), or None when it can."""
    absent = [tool for tool in ("ros2", "colcon") if shutil.which(tool, path=tool_path()) is None]
    absent += [module for module in ("launch_ros", "ros2cli") if importlib.util.find_spec(module) is None]
    if not absent:
        return None
    how = (f"run {ROS2_CLI_SOURCES}/install.sh in this environment" if os.path.isdir(ROS2_CLI_SOURCES) else
           f"no ROS 2 command line sources at {ROS2_CLI_SOURCES} (ROBODYN_ROS2_CLI) and no ROS install")
    return f"{', '.join(absent)} not installed: {how}"


def build_workspace(root, source=CHECKOUT, timeout=600.0):
    """A colcon workspace at ``root`` holding a copy of ``source`` as ``src/robodyn_ros``, built with
    ``colcon build --packages-select robodyn_ros`` on top of this environment (``AMENT_PREFIX_PATH`` its
    prefix, as a pip-installed ROS 2 needs). Returns the environment after ``. install/setup.sh`` (dict);
    RuntimeError with colcon's output if the build fails."""
    src = os.path.join(root, "src", PACKAGE)
    shutil.copytree(source, src, ignore=NOT_COPIED)
    env = dict(os.environ, AMENT_PREFIX_PATH=os.environ.get("AMENT_PREFIX_PATH") or sys.prefix, PATH=tool_path())
    build = subprocess.run(["colcon", "build", "--packages-select", PACKAGE], cwd=root, env=env, text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    if build.returncode != 0:
        raise RuntimeError(f"colcon build failed ({build.returncode}):\n{build.stdout[-3000:]}")
    return sourced(os.path.join(root, "install", "setup.sh"), env)


def sourced(script, env):
    """The environment ``env`` after ``. script`` in a POSIX shell (dict)."""
    out = subprocess.run(["sh", "-c", f'. "{script}" && env -0'], env=env, check=True, stdout=subprocess.PIPE).stdout
    return dict(item.split("=", 1) for item in out.decode().split("\0") if "=" in item)


def ros2(env, *args, timeout=60.0):
    """``ros2 ARGS`` to completion: ``CompletedProcess`` (text stdout, stderr). A command that outlives
    ``timeout`` s is interrupted and its result returned with returncode None."""
    proc = subprocess.Popen(["ros2", *map(str, args)], env=env, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=_default_signals, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=10.0)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        code = None
    return subprocess.CompletedProcess(proc.args, code, out, err)


def _default_signals():
    # a process started from a non-interactive shell's background job inherits SIGINT ignored; a terminal's
    # foreground command has the default dispositions
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


# The stand-in for a terminal (run with ``python -c``, importing nothing heavy): it ignores SIGINT and SIGTERM,
# starts ARGS with the default dispositions, becomes the subreaper of everything below it (a process whose
# parent dies, e.g. a node of a ``ros2 launch`` killed by SIGTERM, is reparented to it rather than to init),
# and writes to FILE the child's pid, then, once no process is left below it, every exit code it reaped with
# the time (time.monotonic, the same clock in every process) it reaped it.
_TERMINAL = """
import ctypes, json, os, signal, sys, time
path, args = sys.argv[1], sys.argv[2:]
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, signal.SIG_IGN)
child = os.fork()
if child == 0:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(args[0], args)
    finally:
        os._exit(127)
with open(path, "w") as f:
    f.write(json.dumps({"child": child}) + "\\n")
exits = {}
while True:
    try:
        pid, status = os.wait()
    except ChildProcessError:
        break
    exits[pid] = (os.waitstatus_to_exitcode(status), time.monotonic())
with open(path, "a") as f:
    f.write(json.dumps({"exits": exits}) + "\\n")
sys.exit(min(max(exits.get(child, (1,))[0], 0), 255))
"""


class Launched:
    """A command (``ros2 launch ...``, ``ros2 run ...``) started as a terminal's foreground job: in a process
    group of its own under a stand-in for the terminal (``_TERMINAL``) that reaps every process below it,
    orphans included, and so knows all their exit codes; output (stdout and stderr) into ``log_path`` (a
    file, so that a chatty process never blocks on a pipe). A context manager that ends the whole group
    (SIGINT, then SIGKILL) if something still runs on exit."""

    def __init__(self, args, env, log_path=None, cwd=None):
        import tempfile

        self.args = [str(a) for a in args]
        if log_path is None:
            handle, log_path = tempfile.mkstemp(prefix="robodyn_launched_", suffix=".log")
            os.close(handle)
        self.log_path = log_path
        self._report = log_path + ".exits"
        self._log = open(log_path, "w")
        self.terminal = subprocess.Popen([sys.executable, "-c", _TERMINAL, self._report, *self.args], env=env, cwd=cwd,
                                         stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        self.pid = None             # the command's own pid, once the terminal reported it
        deadline = time.monotonic() + 30.0
        while self.pid is None and time.monotonic() < deadline and self.terminal.poll() is None:
            self.pid = self._reported().get("child")
            time.sleep(0.01)
        self.pid = self.pid or self._reported().get("child")
        self.signalled_at = None

    def _reported(self):
        found = {}
        try:
            with open(self._report) as f:
                for line in f:
                    if line.endswith("\n"):
                        found.update(json.loads(line))
        except OSError:
            pass
        return found

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def descendants(self):
        """Pids of the processes below the command (children, grandchildren, ...; orphans reparented to the
        terminal included), alive now."""
        return [pid for pid in descendants(self.terminal.pid) if pid != self.pid]

    def ctrl_c(self):
        """SIGINT to the whole process group, as Ctrl-C in a terminal sends it."""
        self.signalled_at = time.monotonic()
        os.killpg(self.terminal.pid, signal.SIGINT)

    def send(self, sig):
        """``sig`` to the command alone (``kill -TERM PID`` of ``ros2 launch``)."""
        self.signalled_at = time.monotonic()
        os.kill(self.pid, sig)

    def wait(self, timeout):
        """Wait until no process is left below the terminal, at most ``timeout`` s. Returns ``{pid: (exit
        code, time.monotonic() when it ended)}`` of every process the terminal reaped (the command, and those
        of its descendants that outlived their parent; negative code: killed by that signal), or None if
        some still run."""
        try:
            self.terminal.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        return {int(pid): tuple(ended) for pid, ended in self._reported().get("exits", {}).items()}

    def stop_group(self):
        """Anything left of the group: SIGINT, then SIGKILL after 10 s."""
        for sig, wait in ((signal.SIGINT, 10.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.terminal.pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self.terminal.poll() is None:
                time.sleep(0.05)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.terminal.poll() is None:
            self.stop_group()
        if self.terminal.poll() is None:
            self.terminal.kill()
        self.terminal.wait()
        self._log.close()
        if os.path.exists(self._report):
            os.remove(self._report)


def launched_processes(launch_output):
    """``{name: pid}`` of the processes ``ros2 launch`` says it started (``[name-N]: process started with pid
    [PID]``)."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"\[INFO\] \[([\w.-]+)-\d+\]: process started with pid "
                                                            r"\[(\d+)\]", launch_output)}


def launched_exits(launch_output):
    """``{name: exit code}`` of the processes ``ros2 launch`` reports ended: 0 for "process has finished
    cleanly", the code of "process has died [pid N, exit code C, ...]"."""
    exits = {m.group(1): 0 for m in re.finditer(r"\[([\w.-]+)-\d+\]: process has finished cleanly", launch_output)}
    exits.update({m.group(1): int(m.group(2)) for m in re.finditer(
        r"\[([\w.-]+)-\d+\]: process has died \[pid \d+, exit code (-?\d+)", launch_output)})
    return exits


def traceback_lines(text):
    """The lines of ``text`` that show a Python traceback, a FATAL log or an exception."""
    return [line for line in text.splitlines() if TRACEBACK.search(line)]


def held_shm_files(pids):
    """The Fast DDS shared-memory files in /dev/shm whose lock processes ``pids`` hold now: the ``*_el`` lock
    file of every segment and port that a participant of theirs created (Fast DDS holds it while the owner
    lives, and removes segment, port and lock when the participant is destroyed)."""
    held = _shm_locks()
    pids = set(pids)
    return {path for path, owners in held.items() if owners & pids}


def abandoned_shm_files(files):
    """Those of the lock files ``files`` (:func:`held_shm_files`) that still exist, with their segment, though
    no process holds their lock any more: what Fast DDS itself calls a zombie segment, left by a process
    that exited without destroying its participant."""
    held = _shm_locks()
    left = set()
    for path in files:
        if os.path.exists(path) and not held.get(path):
            left.add(path)
            if os.path.exists(path[:-len("_el")]):
                left.add(path[:-len("_el")])
    return left


def _shm_locks():
    """``{/dev/shm path: set of pids holding a lock on it}`` from /proc/locks."""
    inodes = {}
    for line in open("/proc/locks"):
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK":
            continue
        major, minor, inode = fields[5].split(":")
        inodes.setdefault((int(major, 16), int(minor, 16), int(inode)), set()).add(int(fields[4]))
    held = {}
    for name in os.listdir("/dev/shm"):
        if not name.endswith("_el"):
            continue
        path = os.path.join("/dev/shm", name)
        try:
            st = os.stat(path)
        except OSError:
            continue
        owners = inodes.get((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino))
        if owners:
            held[path] = owners
    return held

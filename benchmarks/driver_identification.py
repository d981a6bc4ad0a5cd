"""The README's identification workflow (config, excite, follow the motion on the simulator, record, identify)
once per driver profile against the generic one, on the same simulated robot: the simulator emulates the
driver (what it adds to the commands, how it reports efforts), the controller speaks it, and ``robodyn identify
--driver`` reads the bag as that driver wrote it. Prints the held-out torque error (filtered / raw) per run and
the profile's over the generic one's.

The simulated robot is a perturbed plant (``--plant``, default ``perturbed:1``: masses, inertias, friction and
rotor inertia drawn away from the URDF's), so that there is something to identify. What it shows: the
workflow runs through every profile and identifies the robot as well as from full joint torques. What it
cannot show: a real driver's timing, a real robot's friction, or efforts from a real sensor.

    python benchmarks/driver_identification.py                          # panda/franka, ur5/ur, iiwa/lbr, 60 s
    python benchmarks/driver_identification.py --pairs ur5:ur --seconds 90
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile

PAIRS = ("panda:franka", "ur5:ur", "iiwa:lbr")


def robodyn(*args, cwd, log):
    """``robodyn ARGS`` in ``cwd`` with its output in ``log``; raises on a non-zero exit naming the command."""
    with open(os.path.join(cwd, log), "w") as out:
        code = subprocess.call([sys.executable, "-m", "robodyn_ros.cli", *args], cwd=cwd, stdout=out,
                               stderr=subprocess.STDOUT)
    if code != 0:
        raise RuntimeError(f"robodyn {' '.join(args)} ended with {code} (see {os.path.join(cwd, log)})")


def node(kind, *params, cwd, log):
    """A node process in its own process group."""
    out = open(os.path.join(cwd, log), "w")
    return subprocess.Popen([sys.executable, "-m", "robodyn_ros.cli", "node", kind, "--ros-args", *params], cwd=cwd,
                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def stop(process):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30.0)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def held_out(text):
    """(filtered, raw) held-out relative torque error of the identified model, %, from identify's output."""
    match = re.search(r"^\s+identified\s+([\d.]+) % /\s+([\d.]+) %", text, re.M)
    return float(match.group(1)), float(match.group(2))


def run(robot, driver, folder, seconds, plant):
    """One workflow run; returns ``(filtered, raw)`` held-out error (%) and the simulator's driver events."""
    robot_file, trajectory = os.path.join(folder, f"{robot}.yaml"), os.path.join(folder, "traj.csv")
    if not os.path.exists(robot_file):
        robodyn("config", robot, "--output", robot_file, cwd=folder, log="config.log")
    if not os.path.exists(trajectory):
        robodyn("excite", "--urdf", robot_file, "--output", trajectory, "--start", "home", cwd=folder,
                log="excite.log")
    bag = os.path.join(folder, f"bag_{driver}")
    nodes = [node("inverse_dynamics", "--params-file", robot_file, "-p", "state_timeout:=0.5", "-p",
                  f"driver:={driver}", "-p", "reference:=file", "-p", f"trajectory_file:={trajectory}", cwd=folder,
                  log=f"ctl_{driver}.log"),
             node("simulator", "--params-file", robot_file, "-p", f"driver:={driver}", "-p", "real_time_factor:=0.0",
                  "-p", "lockstep_timeout:=0.2", "-p", f"plant:={plant}", cwd=folder, log=f"sim_{driver}.log")]
    try:
        robodyn("record", bag, "--topics", "/joint_states", "--duration", str(seconds), cwd=folder,
                log=f"record_{driver}.log")
    finally:
        for process in nodes:
            stop(process)
    robodyn("identify", bag, "--urdf", robot_file, "--output", os.path.join(folder, f"params_{driver}.yaml"),
            "--holdout", "0.3", "--driver", driver, "--quiet", cwd=folder, log=f"identify_{driver}.log")
    with open(os.path.join(folder, f"identify_{driver}.log")) as stream:
        errors = held_out(stream.read())
    with open(os.path.join(folder, f"sim_{driver}.log")) as stream:
        events = sum(1 for line in stream
                     if any(word in line for word in ("robot_receive_timeout", "constraints_violation", "diverged")))
    return errors, events


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", default=",".join(PAIRS), help="ROBOT:DRIVER,... (default %(default)s)")
    p.add_argument("--seconds", type=float, default=60.0, help="recording length, s (default 60)")
    p.add_argument("--plant", default="perturbed:1", help="the simulated robot (default perturbed:1)")
    args = p.parse_args(argv)
    from robodyn_ros.ros.testing import isolated_ros_domain
    print(f"{'robot':6s} {'driver':8s} {'held-out filtered / raw (%)':>28s} {'driver events':>14s} "
          f"{'over generic':>13s}")
    with tempfile.TemporaryDirectory() as root, isolated_ros_domain():
        for pair in args.pairs.split(","):
            robot, driver = pair.split(":")
            folder = os.path.join(root, robot)
            os.makedirs(folder, exist_ok=True)
            results = {d: run(robot, d, folder, args.seconds, args.plant) for d in (driver, "generic")}
            for d, ((filtered, raw), events) in results.items():
                ratio = filtered / results["generic"][0][0]
                print(f"{robot:6s} {d:8s} {filtered:13.2f} / {raw:6.2f}       {events:14d} {ratio:13.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Installs robodyn_ros both ways, `pip install .` and `colcon build` (an ament_python package), with the same
files: the console script `robodyn` on PATH (colcon: install/robodyn_ros/bin, which its setup.sh puts on
PATH), and in <prefix>/lib/robodyn_ros, where `ros2 run` and launch_ros look for a package's executables,
the node executables and `robodyn` (nodes/: one shell script under each name), next to the ament index
marker, package.xml, the launch files and the parameter files in <prefix>/share. So `ros2 launch robodyn_ros
...` works after a plain pip install too, with AMENT_PREFIX_PATH naming the environment's prefix."""
from glob import glob

from setuptools import find_packages, setup

package_name = "robodyn_ros"

ROS_EXTRA = [
    "ros-rclpy", "ros-rmw-fastrtps-cpp", "ros-sensor-msgs", "ros-geometry-msgs", "ros-std-msgs",
    "ros-trajectory-msgs", "ros-diagnostic-msgs", "ros-rcl-interfaces", "ros-lifecycle-msgs", "ros-std-srvs",
]
# MuJoCo: an engine for the simulated plant that this package did not write (Simulator(engine="mujoco"))
MUJOCO_EXTRA = ["mujoco>=3"]
# pytest 9.2 keeps a node's id where pytest-xdist 3.8 does not look: --dist loadgroup (setup.cfg) would run the
# many-process tests on both workers at once
TEST_EXTRA = ["pytest>=7,<9.2", "pytest-xdist", "pin>=3", "example-robot-data>=4", "hypothesis>=6"] + MUJOCO_EXTRA

NODES = ["simulator", "inverse_dynamics", "estimator", "mpc"]

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    # the C runtime of the compiled kernels (kernels/c_runtime.py reads it when generating a module)
    package_data={package_name: ["robots/*.urdf", "robots/*.yaml", "kernels/runtime/*.h", "kernels/runtime/*.c",
                                 "kernels/runtime/*.c.in"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", glob("launch/*.launch.py")),
        ("share/" + package_name + "/config", glob("config/*.yaml") + glob("config/*.xml")),
        ("lib/" + package_name, [f"nodes/{name}" for name in NODES + ["robodyn"]]),
    ],
    python_requires=">=3.10",
    install_requires=["numpy>=1.24", "scipy>=1.10", "casadi>=3.6", "urdfdom-py>=1.2", "rosbags>=0.10",
                      "pyyaml>=6", "matplotlib>=3.7"],
    extras_require={"ros": ROS_EXTRA, "test": TEST_EXTRA, "mujoco": MUJOCO_EXTRA},
    zip_safe=True,
    maintainer="robodyn_ros developers",
    maintainer_email="dev@robodyn.invalid",
    description="Rigid-body dynamics, online identification and adaptive control for robot arms",
    license="BSD-3-Clause",
    entry_points={"console_scripts": ["robodyn = robodyn_ros.cli:main"]},
)

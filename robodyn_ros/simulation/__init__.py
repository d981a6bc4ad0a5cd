"""The Gazebo-free simulator: plant dynamics, joint limits, sensor noise."""

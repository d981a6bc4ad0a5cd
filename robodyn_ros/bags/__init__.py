"""ROS 2 bag reading and writing without ROS (rosbags)."""

"""The ROS 2 layer: the only subpackage that imports rclpy and message packages."""

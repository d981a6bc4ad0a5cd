"""Robot model: URDF loading, joints, spatial algebra, the math backend."""

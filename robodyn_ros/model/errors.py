class ModelError(ValueError):
    """Invalid robot description or input; the message names the culprit."""


class NonPhysicalInertiaWarning(UserWarning):
    """A URDF loaded with inertias no rigid body can have, or with a moving body whose subtree carries no
    inertia (``strict=True`` refuses such a model); ``model.notes`` names every link."""

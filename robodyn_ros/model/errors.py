class ModelError(ValueError):
    """Invalid robot description or input; the message names the culprit."""

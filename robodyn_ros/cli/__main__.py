"""``python -m robodyn_ros.cli ...`` runs the ``robodyn`` command."""
import sys

from .main import main

sys.exit(main())

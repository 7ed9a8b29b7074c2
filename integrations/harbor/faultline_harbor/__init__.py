"""faultline's Harbor integration.

`faultline_harbor.namespace:NamespaceEnvironment` is a Harbor environment
provider that needs no container runtime: each trial runs in Linux namespaces
over a read-only view of the host's userland. Use it with

    harbor run -p TASK -a AGENT --env faultline_harbor.namespace:NamespaceEnvironment

This module imports nothing from Harbor: the trial's init (trial_init.py)
imports the package with the standard library only.
"""

__version__ = "0.1.0"

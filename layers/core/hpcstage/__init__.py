"""hpcstage core: S3 inventory (plan, list, output, report) and HPC staging.

The core knows nothing of Lambda events, the CLI, the local emulator or the simulator:
AWS clients are passed in, so the same code runs everywhere.
"""

__version__ = "0.1.0"

import sys
from pathlib import Path

# tests/fakes.py is a test helper module shared by the tiers, imported by its file name.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

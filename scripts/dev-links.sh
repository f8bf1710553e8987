#!/usr/bin/env bash
# For an editable install (`pip install -e .`): link the design-card top-level
# folders into the localkg package, as the wheel's force-include does.
set -euo pipefail
cd "$(dirname "$0")/.."
ln -sfn ../loaders localkg/loaders
ln -sfn ../indexes localkg/indexes
ln -sfn ../cli.py localkg/cli.py
